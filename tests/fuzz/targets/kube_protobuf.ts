/**
 * Fuzz target `kube_protobuf`: the Kubernetes protobuf decoder (`lib/wire/kubernetes/decode.ts`)
 * and the length-delimited watch framing (`lib/wire/kubernetes/framing.ts`).
 *
 * The first input octet picks the form: even, the rest is one enveloped object (`k8s\x00` and a
 * `runtime.Unknown`), as a get or a list answers; odd, the rest is a watch body of 4-byte
 * big-endian lengths and `metav1.WatchEvent` frames, under a 4 KiB frame limit so that inputs
 * reach it.
 *
 * Checked: the decoder gives an object or refuses with `KubeProtobufError`, nothing else; a
 * decoded object written again by the test kit's writer from the same tables decodes to the same
 * object (presence, times, maps and numbers survive the JSON form); the framing gives the same
 * frames, or the same refusal, whether the body comes whole, in random pieces or byte by byte,
 * keeps at most one frame's declared length between pieces, and refuses a length over the limit
 * when its 4 bytes are in. Structured inputs are the test kit's fixtures (managed fields and
 * unknown fields of every wire type inside their metadata), sometimes truncated, framed into
 * watch bodies with lengths that are sometimes wrong or huge.
 *
 * @module
 */

import type { FuzzTarget, Rng } from "../target.ts";
import { randomPieces } from "../rng.ts";
import {
  decodeObject,
  decodeWatchEvent,
  KubeProtobufError,
} from "../../../lib/wire/kubernetes/decode.ts";
import { FrameError, LengthFrameSplitter } from "../../../lib/wire/kubernetes/framing.ts";
import { OBJECT_META } from "../../../lib/wire/kubernetes/tables.ts";
import {
  lengthFrame,
  ProtoWriter,
  writeObject,
  writeUnknown,
  writeWatchEvent,
} from "../../../testkit/kube_protobuf_writer.ts";
import {
  azureFilePersistentVolume,
  csiNode,
  expiredStatus,
  failingVolumeAttachment,
  lease,
  notFoundStatus,
  persistentVolume,
  volumeAttachment,
} from "../../../testkit/kube_protobuf_fixtures.ts";
import { isDeepStrictEqual } from "node:util";

const MAX_FRAME_BYTES = 4096;
const BYTEWISE_MAX = 4096;

const FIXTURES = [
  volumeAttachment,
  failingVolumeAttachment,
  persistentVolume,
  azureFilePersistentVolume,
  csiNode,
  lease,
  notFoundStatus,
  expiredStatus,
];

const META_EXTRA = new ProtoWriter()
  .raw(writeUnknown())
  .bytes(17, new ProtoWriter().string(1, "kube-controller-manager").string(2, "Update").finish())
  .finish();

function fixtureBytes(i: number): Uint8Array {
  return writeObject(FIXTURES[i % FIXTURES.length]!(), { [OBJECT_META.proto]: META_EXTRA });
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Decodes one object or refuses it; a decoded object must survive a second trip. */
function checkObject(bytes: Uint8Array): void {
  let obj: Record<string, unknown>;
  try {
    obj = decodeObject(bytes);
  } catch (err) {
    if (err instanceof KubeProtobufError) return;
    throw err;
  }
  const again = decodeObject(writeObject(obj));
  if (!isDeepStrictEqual(again, obj)) {
    throw new Error(
      `re-encoding changed the object: ${JSON.stringify(obj).slice(0, 300)} -> ${
        JSON.stringify(again).slice(0, 300)
      }`,
    );
  }
}

/** The frames of `pieces` (as hex, to compare), or the refusal's message. */
function framesOf(pieces: Uint8Array[]): string[] | string {
  const splitter = new LengthFrameSplitter(MAX_FRAME_BYTES);
  const frames: Uint8Array[] = [];
  try {
    for (const piece of pieces) {
      splitter.push(piece, frames);
      if (splitter.pendingBytes > MAX_FRAME_BYTES + 4) {
        throw new Error(`invariant: ${splitter.pendingBytes} bytes kept between pieces`);
      }
    }
    splitter.end();
  } catch (err) {
    if (err instanceof FrameError) return `refused after ${frames.length} frames`;
    throw err;
  }
  return frames.map((f) => {
    if (f.length > MAX_FRAME_BYTES) throw new Error("invariant: frame over the limit");
    return Array.from(f, (b) => b.toString(16).padStart(2, "0")).join("");
  });
}

function checkWatch(body: Uint8Array): void {
  const whole = framesOf([body]);
  const ways: [string, Uint8Array[]][] = [["random pieces", randomPieces(body, 0x6b387300)]];
  if (body.length <= BYTEWISE_MAX) {
    ways.push([
      "byte by byte",
      [...body].map((b) => Uint8Array.of(b)),
    ]);
  }
  for (const [how, pieces] of ways) {
    const got = framesOf(pieces);
    if (JSON.stringify(got) !== JSON.stringify(whole)) {
      throw new Error(
        `split ${how}: ${JSON.stringify(got).slice(0, 200)}; whole: ${
          JSON.stringify(whole).slice(0, 200)
        }`,
      );
    }
  }
  // Decode the frames of the whole body.
  const splitter = new LengthFrameSplitter(MAX_FRAME_BYTES);
  const frames: Uint8Array[] = [];
  try {
    splitter.push(body, frames);
  } catch (err) {
    if (!(err instanceof FrameError)) throw err;
  }
  for (const frame of frames) {
    try {
      const event = decodeWatchEvent(frame);
      if (typeof event.type !== "string" || typeof event.object !== "object") {
        throw new Error(`invariant: decoded ${JSON.stringify(event).slice(0, 100)}`);
      }
    } catch (err) {
      if (!(err instanceof KubeProtobufError)) throw err;
    }
  }
}

function seeds(): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < FIXTURES.length; i++) out.push(concat([Uint8Array.of(0), fixtureBytes(i)]));
  const events = FIXTURES.map((_, i) =>
    lengthFrame(writeWatchEvent(i % 3 ? "MODIFIED" : "ADDED", fixtureBytes(i)))
  );
  out.push(concat([Uint8Array.of(1), ...events]));
  // A 4 GiB frame length after a good event; an event whose object is JSON; a truncated varint.
  out.push(concat([Uint8Array.of(1), events[0]!, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0)]));
  out.push(
    concat([
      Uint8Array.of(1),
      lengthFrame(writeWatchEvent("ADDED", new TextEncoder().encode('{"kind":"Lease"}'))),
    ]),
  );
  out.push(Uint8Array.of(0, 0x6b, 0x38, 0x73, 0x00, 0x12, 0x02, 0x08, 0x80));
  return out;
}

/** The target. */
export const target: FuzzTarget = {
  name: "kube_protobuf",
  seeds,
  generate(rng: Rng): Uint8Array {
    if (rng.next() < 0.4) {
      const bytes = fixtureBytes(rng.int(FIXTURES.length));
      const cut = rng.next() < 0.3 ? bytes.subarray(0, rng.int(bytes.length + 1)) : bytes;
      return concat([Uint8Array.of(0), cut]);
    }
    const parts: Uint8Array[] = [Uint8Array.of(1)];
    for (let n = 1 + rng.int(4); n > 0; n--) {
      const event = writeWatchEvent(
        ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "X"][rng.int(6)]!,
        fixtureBytes(rng.int(FIXTURES.length)),
      );
      const r = rng.next();
      if (r < 0.8) parts.push(lengthFrame(event));
      else {
        // A wrong length: short, long or huge.
        const header = new Uint8Array(4);
        const length = r < 0.9 ? rng.int(event.length * 2 + 1) : 0xffffffff - rng.int(1000);
        new DataView(header.buffer).setUint32(0, length);
        parts.push(header, event);
      }
    }
    return concat(parts);
  },
  run(input: Uint8Array): void {
    if (input.length === 0) return;
    const body = input.subarray(1);
    if ((input[0]! & 1) === 0) checkObject(body);
    else checkWatch(body);
  },
};
