import assert from "node:assert/strict";
import {
  encodeHeaders,
  type HeaderField,
  HeaderListSizeError,
  HpackDecoder,
  HpackError,
} from "./hpack.ts";
import { HUFFMAN_CODES } from "../../../testkit/h2/huffman_table.ts";

const hex = (s: string) =>
  Uint8Array.from(s.replace(/\s+/g, "").match(/../g) ?? [], (h) => parseInt(h, 16));

/** An integer with an N-bit prefix (RFC 7541 §5.1) after the flag bits `first`. */
function integer(value: number, prefixBits: number, first = 0): number[] {
  const max = 2 ** prefixBits - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  for (value -= max; value >= 0x80; value = Math.floor(value / 0x80)) out.push(0x80 | value % 0x80);
  out.push(value);
  return out;
}

/**
 * The dynamic table of `d`, newest first, read through indexed fields 62, 63, … (RFC 7541
 * §2.3.3), which do not change it.
 */
function dynamicTable(d: HpackDecoder): HeaderField[] {
  const out: HeaderField[] = [];
  for (let index = 62;; index++) {
    try {
      out.push(d.decode(Uint8Array.from(integer(index, 7, 0x80)))[0]!);
    } catch (err) {
      if (err instanceof HpackError && /out of range/.test(err.message)) return out;
      throw err;
    }
  }
}

/** The size of `d`'s dynamic table in octets (RFC 7541 §4.1). */
function tableSize(d: HpackDecoder): number {
  return dynamicTable(d).reduce((n, [name, value]) => n + name.length + value.length + 32, 0);
}

/** Decodes Huffman-coded `bytes` as the value of a literal field without indexing (§6.2.2). */
function huffmanDecode(bytes: Uint8Array): string {
  const block = [0x00, 0x01, 0x78, ...integer(bytes.length, 7, 0x80), ...bytes];
  return new HpackDecoder().decode(Uint8Array.from(block))[0]![1];
}

/** A code of `bits` bits followed by EOS padding to a whole octet. */
function padded(code: number, bits: number): Uint8Array {
  const text = code.toString(2).padStart(bits, "0") + "1".repeat((8 - (bits % 8)) % 8);
  return Uint8Array.from(text.match(/.{8}/g)!, (b) => parseInt(b, 2));
}

const REQUEST_1: HeaderField[] = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"],
];
const REQUEST_2: HeaderField[] = [...REQUEST_1, ["cache-control", "no-cache"]];
const REQUEST_3: HeaderField[] = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"],
];

Deno.test("RFC 7541 C.1: integers with 5- and 8-bit prefixes", () => {
  // Decoded through indexed fields and a table size update.
  const d = new HpackDecoder({ maxTableSize: 4096 });
  assert.deepEqual(d.decode(hex("82")), [[":method", "GET"]]);
  // C.1.2: 1337 with a 5-bit prefix, as a table size update (limit raised for the test).
  const big = new HpackDecoder({ maxTableSize: 2000 });
  assert.deepEqual(big.decode(hex("3f9a0a")), []);
  assert.throws(
    () => new HpackDecoder({ maxTableSize: 1000 }).decode(hex("3f9a0a")),
    /table size update 1337/,
  );
});

Deno.test("RFC 7541 C.2: literal header field representations", () => {
  const d = new HpackDecoder();
  // C.2.1 with indexing
  assert.deepEqual(
    d.decode(hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")),
    [["custom-key", "custom-header"]],
  );
  assert.equal(tableSize(d), 55);
  // C.2.2 without indexing, C.2.3 never indexed: the table does not change
  assert.deepEqual(d.decode(hex("040c 2f73 616d 706c 652f 7061 7468")), [
    [":path", "/sample/path"],
  ]);
  assert.deepEqual(d.decode(hex("1008 7061 7373 776f 7264 0673 6563 7265 74")), [
    ["password", "secret"],
  ]);
  assert.equal(tableSize(d), 55);
  // C.2.4 indexed
  assert.deepEqual(d.decode(hex("82")), [[":method", "GET"]]);
});

Deno.test("RFC 7541 C.3: requests without Huffman coding share the dynamic table", () => {
  const d = new HpackDecoder();
  assert.deepEqual(
    d.decode(hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d")),
    REQUEST_1,
  );
  assert.equal(tableSize(d), 57);
  assert.deepEqual(d.decode(hex("8286 84be 5808 6e6f 2d63 6163 6865")), REQUEST_2);
  assert.equal(tableSize(d), 110);
  assert.deepEqual(
    d.decode(hex("8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65")),
    REQUEST_3,
  );
  assert.equal(tableSize(d), 164);
  assert.deepEqual(dynamicTable(d), [
    ["custom-key", "custom-value"],
    ["cache-control", "no-cache"],
    [":authority", "www.example.com"],
  ]);
});

Deno.test("RFC 7541 C.4: requests with Huffman coding", () => {
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")), REQUEST_1);
  assert.deepEqual(d.decode(hex("8286 84be 5886 a8eb 1064 9cbf")), REQUEST_2);
  assert.deepEqual(
    d.decode(hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")),
    REQUEST_3,
  );
  assert.equal(tableSize(d), 164);
});

Deno.test("RFC 7541 C.6: responses with Huffman coding evict from a 256-octet table", () => {
  const d = new HpackDecoder({ maxTableSize: 256 });
  const first = d.decode(hex(
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6" +
      "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
  ));
  assert.deepEqual(first, [
    [":status", "302"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
    ["location", "https://www.example.com"],
  ]);
  assert.equal(tableSize(d), 222);
  const second = d.decode(hex("4883 640e ffc1 c0bf"));
  assert.deepEqual(second, [
    [":status", "307"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
    ["location", "https://www.example.com"],
  ]);
  assert.equal(tableSize(d), 222);
  const third = d.decode(hex(
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab" +
      "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f" +
      "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
  ));
  assert.deepEqual(third, [
    [":status", "200"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:22 GMT"],
    ["location", "https://www.example.com"],
    ["content-encoding", "gzip"],
    ["set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"],
  ]);
  assert.equal(tableSize(d), 215);
  assert.deepEqual(dynamicTable(d).map(([n]) => n), ["set-cookie", "content-encoding", "date"]);
});

Deno.test("the Huffman code is RFC 7541 Appendix B's", () => {
  const samples: [symbol: number, code: number, bits: number][] = [
    [0, 0x1ff8, 13],
    [32, 0x14, 6], // ' '
    [48, 0x0, 5], // '0'
    [97, 0x3, 5], // 'a'
    [126, 0x1ffd, 13], // '~'
    [200, 0x3ffffe2, 26],
    [255, 0x3ffffee, 26],
  ];
  for (const [symbol, code, bits] of samples) {
    assert.equal(
      huffmanDecode(padded(code, bits)),
      String.fromCharCode(symbol),
      `symbol ${symbol}`,
    );
  }
  // EOS, 0x3fffffff in 30 bits, is a code too: a string holding it is refused.
  assert.throws(() => huffmanDecode(padded(0x3fffffff, 30)), /contains EOS/);
  // Every byte value decodes from its code in the RFC's table.
  for (let sym = 0; sym < 256; sym++) {
    const [code, len] = HUFFMAN_CODES[sym]!;
    assert.equal(huffmanDecode(padded(code, len)), String.fromCharCode(sym), `symbol ${sym}`);
  }
});

Deno.test("Huffman decoding rejects EOS, long padding and padding that is not all ones", () => {
  assert.throws(() => huffmanDecode(hex("ffff ffff")), HpackError); // EOS
  assert.throws(() => huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f4fe")), /not a prefix of EOS/);
  assert.throws(() => huffmanDecode(hex("1f ff")), /longer than 7 bits/); // 'a' + 11 one bits
  assert.equal(huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")), "www.example.com");
});

Deno.test("the decoder rejects bad indexes, truncation and misplaced table size updates", () => {
  assert.throws(() => new HpackDecoder().decode(hex("80")), /header index 0/);
  assert.throws(() => new HpackDecoder().decode(hex("be")), /out of range/);
  assert.throws(() => new HpackDecoder().decode(hex("400a 6375")), /truncated/);
  assert.throws(() => new HpackDecoder().decode(hex("82 20")), /after a header field/);
  assert.throws(() => new HpackDecoder().decode(hex("3fff ffff ffff 0f")), /too large/);
  // A size update to 0 empties the table; the entries are gone.
  const d = new HpackDecoder();
  d.decode(hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"));
  assert.deepEqual(d.decode(hex("20 3f e1 1f")), []);
  assert.equal(tableSize(d), 0);
  assert.throws(() => d.decode(hex("be")), /out of range/);
});

Deno.test("an entry larger than the table empties it and is not added (§4.4)", () => {
  const d = new HpackDecoder({ maxTableSize: 60 });
  d.decode(hex("4001 61 01 62")); // a: b, 34 octets
  assert.equal(tableSize(d), 34);
  d.decode(hex("4001 63 1e" + "78".repeat(30))); // c: 30 x, 63 octets > 60
  assert.equal(tableSize(d), 0);
  assert.deepEqual(dynamicTable(d), []);
});

Deno.test("encodeHeaders() writes static indexes and plain literals that decode back", () => {
  const fields: HeaderField[] = [
    [":method", "POST"],
    [":scheme", "http"],
    [":path", "/csi.v1.Identity/Probe"],
    [":authority", "localhost"],
    ["content-type", "application/grpc"],
    ["te", "trailers"],
    ["grpc-timeout", "5m"],
    ["x-long", "v".repeat(200)],
  ];
  const block = encodeHeaders(fields);
  assert.deepEqual([...block.subarray(0, 2)], [0x83, 0x86]); // indexed :method POST, :scheme http
  const d = new HpackDecoder();
  assert.deepEqual(d.decode(block), fields);
  assert.equal(tableSize(d), 0, "nothing indexed");
  assert.deepEqual(
    [...encodeHeaders([["te", "trailers"]])],
    [0x00, 0x02, ...new TextEncoder().encode("te"), 0x08, ...new TextEncoder().encode("trailers")],
  );
  assert.throws(() => encodeHeaders([["x", "\u0100"]]), RangeError);
});

Deno.test("integers (§5.1) are refused past 2^32-1 or 5 continuation octets, before they overflow", () => {
  const zeros = (n: number) => new Array(n).fill(0x80);
  // A string length of 127 + 0 + 0 + … never ends the loop on a value that overflowed.
  const lengths = [0x00, 0x01, 0x61, 0x7f, ...zeros(150), 0x01];
  assert.throws(() => new HpackDecoder().decode(Uint8Array.from(lengths)), /integer too large/);
  // The same as an index, a literal's name index and a table size update.
  for (const first of [0xff, 0x7f, 0x1f, 0x0f, 0x3f]) {
    const block = Uint8Array.from([first, ...zeros(150), 0x01]);
    assert.throws(() => new HpackDecoder().decode(block), HpackError, `first octet ${first}`);
  }
  // 2^32-1 itself is an integer (refused as a size, not as an integer); 2^32 is not.
  const max = Uint8Array.from(integer(2 ** 32 - 1, 5, 0x20));
  assert.throws(() => new HpackDecoder().decode(max), /table size update 4294967295 above/);
  const over = Uint8Array.from(integer(2 ** 32, 5, 0x20));
  assert.throws(() => new HpackDecoder().decode(over), /integer too large: above 4294967295/);
  // Padding zeros are fine within 5 continuation octets: a size update to 4096.
  assert.deepEqual(new HpackDecoder().decode(hex("3f e1 9f 80 80 00")), []);
  assert.throws(() => new HpackDecoder().decode(hex("3f e1 9f 80 80 80 00")), /too large/);
});

Deno.test("eviction keeps the dynamic table within its size whatever the peer sends", () => {
  const d = new HpackDecoder();
  for (let i = 0; i < 2000; i++) {
    const name = `x-${i}`;
    d.decode(Uint8Array.from([0x40, name.length, ...new TextEncoder().encode(name), 0x01, 0x76]));
  }
  const size = tableSize(d);
  assert.ok(size <= 4096 && size > 4096 - 40, String(size));
  assert.equal(dynamicTable(d)[0]![0], "x-1999", "the newest entry is index 62");
  // A size update the peer may not send leaves the table as it was, and so does one whose
  // integer does not end within its octets.
  assert.throws(() => d.decode(Uint8Array.from(integer(4097, 5, 0x20))), /above the limit 4096/);
  assert.throws(() => d.decode(Uint8Array.from([0x3f, ...new Array(150).fill(0x80), 0x01])));
  assert.equal(tableSize(d), size);
  for (let i = 0; i < 200; i++) d.decode(hex("4001 6101 62"));
  assert.ok(tableSize(d) <= 4096, "eviction still works");
});

Deno.test("a header list above maxHeaderListSize is decoded to its end, then refused", () => {
  const d = new HpackDecoder({ maxHeaderListSize: 200 });
  // A 100-octet value indexed, then referred to twice more: 3 x 133 octets.
  const literal = [0x40, 0x01, 0x61, 0x64, ...new Array(100).fill(0x62)];
  assert.throws(() => d.decode(Uint8Array.from([...literal, 0xbe, 0xbe])), HeaderListSizeError);
  assert.deepEqual(dynamicTable(d), [["a", "b".repeat(100)]], "the table followed the block");
  assert.deepEqual(d.decode(hex("be")), [["a", "b".repeat(100)]]);
  assert.throws(() => d.decode(hex("be be")), /header list larger than 200 octets/);
  // An empty field counts 32 octets (RFC 9113 §6.5.2): seven fit in 224, not 200.
  assert.throws(() => d.decode(Uint8Array.from(new Array(7).fill([0x00, 0x00, 0x00]).flat())));
});
