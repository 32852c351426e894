/**
 * Fuzz target: the watch frame splitter and event decoding of the Kubernetes client
 * (`lib/kube/request/watch_stream.ts`: `WatchFrameSplitter`, `decodeWatchEvent`) fed one body in pieces
 * split at random.
 *
 * Each input is split three ways (whole, in pieces cut where a PRNG seeded from the input says,
 * and byte by byte when short); all must give the same frames, or all refuse the body. Frames
 * must be trimmed, non-empty, free of newlines and within the limit; each decodes to an event of
 * one of the five watch types with an object, or is refused with an `ApiError`. Anything else is
 * a finding.
 *
 * @module
 */

import type { FuzzTarget, Rng } from "../target.ts";
import { decodeWatchEvent, WatchFrameSplitter } from "../../../lib/kube/request/watch_stream.ts";
import { ApiError } from "../../../lib/kube/api.ts";
import { randomPieces } from "../rng.ts";

/** The frame limit the splitter is given: small, so that generated inputs reach it. */
const MAX_FRAME_BYTES = 4096;
/** Inputs up to this size are also split one byte at a time. */
const BYTEWISE_MAX = 4096;
const TYPES = new Set(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]);
const CTX = { method: "GET", url: new URL("https://kube.invalid/apis/storage.k8s.io/v1/x") };

const ENCODER = new TextEncoder();

/** The frames of `pieces`, or "too-large" when the splitter refused the body. */
function framesOf(pieces: Uint8Array[]): string[] | "too-large" {
  const splitter = new WatchFrameSplitter(MAX_FRAME_BYTES);
  const frames: string[] = [];
  try {
    for (const piece of pieces) frames.push(...splitter.push(piece));
  } catch (err) {
    if (err instanceof ApiError && err.reason === "InvalidResponse") return "too-large";
    throw err;
  }
  const last = splitter.end();
  if (last !== undefined) frames.push(last);
  return frames;
}

/** Throws unless `frame` is a frame the splitter may give, and decodes or refuses as it may. */
function checkFrame(frame: string): void {
  if (frame === "" || frame !== frame.trim() || frame.includes("\n")) {
    throw new Error(`invariant: frame ${JSON.stringify(frame.slice(0, 80))}`);
  }
  // One UTF-16 unit at most per byte: the decoded frame is no longer than its bytes.
  if (frame.length > MAX_FRAME_BYTES) throw new Error("invariant: frame too long");
  try {
    const event = decodeWatchEvent(frame, CTX);
    if (!TYPES.has(event.type) || typeof event.object !== "object" || event.object === null) {
      throw new Error(`invariant: decoded ${JSON.stringify(event).slice(0, 80)}`);
    }
  } catch (err) {
    if (!(err instanceof ApiError && err.reason === "InvalidResponse")) throw err;
  }
}

const SEEDS = [
  '{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n',
  '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n\n\n' +
  '{"type":"ERROR","object":{"kind":"Status","code":410}}',
  '{"type":"MODIFIED","object":{"metadata":{"name":"é✓"}}}\r\n{"type":"DELETED","object":{}}\n',
  '{"type":"SURPRISE","object":{}}\n{"type":"ADDED"}\n[1,2]\nnot json\n',
  `{"type":"ADDED","object":{"data":"${"x".repeat(MAX_FRAME_BYTES)}"}}\n`,
  "\n\n  \n\t\n",
];

/** The target. */
export const target: FuzzTarget = {
  name: "watch_splitter",
  seeds: () => SEEDS.map((s) => ENCODER.encode(s)),
  generate(rng: Rng): Uint8Array {
    const lines: string[] = [];
    for (let i = rng.int(8); i > 0; i--) {
      const type = rng.next() < 0.9
        ? ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"][rng.int(5)]!
        : String.fromCharCode(65 + rng.int(26)).repeat(1 + rng.int(8));
      let value = "";
      for (let n = rng.int(rng.next() < 0.1 ? 6000 : 200); n > 0; n--) {
        // Printable ASCII, some multi-byte characters, never a quote or backslash.
        const c = rng.int(100);
        value += c < 90 ? String.fromCharCode(35 + (c % 57)) : ["é", "✓", "😀"][c % 3]!;
      }
      const line = rng.next() < 0.1
        ? new TextDecoder().decode(rng.bytes(rng.int(40)))
        : JSON.stringify({ type, object: { metadata: { name: value.slice(0, 20) }, value } });
      lines.push(line + (rng.next() < 0.1 ? "\r\n" : "\n") + (rng.next() < 0.1 ? "\n" : ""));
    }
    const bytes = ENCODER.encode(lines.join(""));
    return rng.next() < 0.2 ? bytes.subarray(0, rng.int(bytes.length + 1)) : bytes;
  },
  run(input: Uint8Array): void {
    const whole = framesOf([input]);
    const ways: [string, Uint8Array[]][] = [["random pieces", randomPieces(input, 0x2545f491)]];
    if (input.length <= BYTEWISE_MAX) {
      ways.push(["byte by byte", [...input].map((b) => new Uint8Array([b]))]);
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
    if (whole !== "too-large") { for (const frame of whole) checkFrame(frame); }
  },
};
