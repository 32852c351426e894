/**
 * Fuzz target `hpack`: the HPACK decoder (`lib/wire/http2/hpack.ts`) against the test kit's
 * reference decoder written from RFC 7541 (`testkit/h2/hpack_reference.ts`).
 *
 * An input is a sequence of header blocks, each prefixed by its length in two octets, decoded in
 * turn by one decoder of each kind (the dynamic table carries over, as on a connection). For
 * every block both must agree: the same fields, or both refusing it the same way (malformed, or
 * a header list over the limit); after a block, both dynamic tables hold the same entries. Any
 * other error from ours is a finding.
 *
 * @module
 */

import { HeaderListSizeError, HpackDecoder, HpackError } from "../../../lib/wire/http2/hpack.ts";
import {
  encodeInteger,
  encodeLiterals,
  encodeString,
  ReferenceHpackDecoder,
  ReferenceHpackError,
  ReferenceListSizeError,
} from "../../../testkit/h2/hpack_reference.ts";
import type { FuzzTarget, Rng } from "../target.ts";

/**
 * The header list limit both decoders enforce: small, so that blocks reach it, and above the
 * largest single entry (4 096 + 32), so that the dynamic table can be read back field by field.
 */
const MAX_LIST = 4400;

const hex = (s: string) =>
  Uint8Array.from(s.replace(/\s+/g, "").match(/../g) ?? [], (h) => parseInt(h, 16));

/** Blocks with their 2-octet length prefixes. */
function frameBlocks(blocks: readonly Uint8Array[]): Uint8Array {
  const out: number[] = [];
  for (const b of blocks) out.push(b.length >> 8, b.length & 0xff, ...b);
  return Uint8Array.from(out);
}

function splitBlocks(input: Uint8Array): Uint8Array[] {
  const blocks: Uint8Array[] = [];
  let pos = 0;
  while (pos < input.length) {
    const length = ((input[pos]! << 8) | (input[pos + 1] ?? 0)) & 0xffff;
    blocks.push(input.subarray(pos + 2, pos + 2 + length));
    pos += 2 + length;
  }
  return blocks;
}

type Outcome = { fields: [string, string][] } | { refused: "malformed" | "list" };

function ours(d: HpackDecoder, block: Uint8Array): Outcome {
  try {
    return { fields: d.decode(block).map(([n, v]) => [n, v]) };
  } catch (err) {
    if (err instanceof HpackError) return { refused: "malformed" };
    if (err instanceof HeaderListSizeError) return { refused: "list" };
    throw err;
  }
}

function reference(d: ReferenceHpackDecoder, block: Uint8Array): Outcome {
  try {
    return { fields: d.decode(block) };
  } catch (err) {
    if (err instanceof ReferenceHpackError) return { refused: "malformed" };
    if (err instanceof ReferenceListSizeError) return { refused: "list" };
    throw err;
  }
}

/** Our dynamic table, read through indexed fields 62, 63, … (which change nothing). */
function ourTable(d: HpackDecoder): string[] {
  const out: string[] = [];
  for (let index = 62;; index++) {
    try {
      const [f] = d.decode(Uint8Array.from(encodeInteger(index, 7, 0x80)));
      out.push(`${f![0]}: ${f![1]}`);
    } catch (err) {
      if (err instanceof HpackError) return out;
      throw err;
    }
  }
}

const NAMES = [
  "content-type",
  "grpc-status",
  "grpc-message",
  ":status",
  "x",
  "",
  "x-" + "n".repeat(40),
];

function randomString(rng: Rng): string {
  switch (rng.int(4)) {
    case 0:
      return NAMES[rng.int(NAMES.length)]!;
    case 1:
      return String.fromCharCode(...rng.bytes(rng.int(12)));
    case 2:
      return "v".repeat(rng.int(rng.next() < 0.05 ? 5000 : 300));
    default:
      return String(rng.int(1_000_000));
  }
}

/** One representation (RFC 7541 §6), mostly well formed. */
function representation(rng: Rng, out: number[]): void {
  const huffman = () => rng.next() < 0.5;
  switch (rng.int(6)) {
    case 0: // indexed, static or dynamic, sometimes out of range
      out.push(...encodeInteger(1 + rng.int(rng.next() < 0.9 ? 70 : 5000), 7, 0x80));
      return;
    case 1: // literal with incremental indexing, new name or indexed name
    case 2: {
      const nameIndex = rng.next() < 0.5 ? 0 : 1 + rng.int(70);
      out.push(...encodeInteger(nameIndex, 6, 0x40));
      if (nameIndex === 0) out.push(...encodeString(randomString(rng), huffman()));
      out.push(...encodeString(randomString(rng), huffman()));
      return;
    }
    case 3: // without indexing or never indexed
    case 4: {
      const nameIndex = rng.next() < 0.5 ? 0 : 1 + rng.int(70);
      out.push(...encodeInteger(nameIndex, 4, rng.next() < 0.5 ? 0x00 : 0x10));
      if (nameIndex === 0) out.push(...encodeString(randomString(rng), huffman()));
      out.push(...encodeString(randomString(rng), huffman()));
      return;
    }
    default: // a table size update, anywhere
      out.push(...encodeInteger(rng.int(rng.next() < 0.8 ? 4097 : 2 ** 32), 5, 0x20));
  }
}

export const target: FuzzTarget = {
  name: "hpack",
  seeds(): Uint8Array[] {
    return [
      // RFC 7541 C.3 and C.4: requests sharing a dynamic table; C.6: evicting responses.
      frameBlocks([
        hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
        hex("8286 84be 5808 6e6f 2d63 6163 6865"),
        hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"),
      ]),
      frameBlocks([
        hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        hex("8286 84be 5886 a8eb 1064 9cbf"),
        hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
      ]),
      frameBlocks([
        hex("3f e1 1f 20 3f e1 1f"),
        hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6"),
        hex("0001 61 7f 80 80 80 80 80 01"),
      ]),
      // A gRPC response's headers and trailers, as literals and Huffman-coded.
      frameBlocks([
        encodeLiterals([[":status", "200"], ["content-type", "application/grpc"]]),
        Uint8Array.from([
          0x40,
          ...encodeString("grpc-status", true),
          ...encodeString("0", true),
          0x40,
          ...encodeString("grpc-message", true),
          ...encodeString("volume %22v%22 not found", true),
          0xbf,
          0xbe,
        ]),
      ]),
    ];
  },
  generate(rng: Rng): Uint8Array {
    const blocks: Uint8Array[] = [];
    const count = 1 + rng.int(6);
    for (let b = 0; b < count; b++) {
      const out: number[] = [];
      const representations = rng.int(rng.next() < 0.1 ? 300 : 12);
      for (let i = 0; i < representations; i++) representation(rng, out);
      blocks.push(Uint8Array.from(out.slice(0, 0xffff)));
    }
    return frameBlocks(blocks);
  },
  run(input: Uint8Array): void {
    const mine = new HpackDecoder({ maxHeaderListSize: MAX_LIST });
    const theirs = new ReferenceHpackDecoder({ maxHeaderListSize: MAX_LIST });
    for (const [i, block] of splitBlocks(input).entries()) {
      const a = ours(mine, block);
      const b = reference(theirs, block);
      const as = JSON.stringify(a);
      const bs = JSON.stringify(b);
      if (as !== bs) {
        throw new Error(`block ${i}: ours ${as.slice(0, 300)}, reference ${bs.slice(0, 300)}`);
      }
      if ("refused" in a && a.refused === "malformed") return; // the connection would end here
      const ta = ourTable(mine);
      const tb = theirs.table.entries.map(([n, v]) => `${n}: ${v}`);
      if (JSON.stringify(ta) !== JSON.stringify(tb)) {
        throw new Error(`block ${i}: dynamic tables differ: ${ta.length} vs ${tb.length} entries`);
      }
    }
  },
};
