/**
 * Strings read from protobuf are kept by the caches for as long as their objects live (names,
 * uids, volume handles, node names), so each must cost what its characters cost: a flat string,
 * never a tree of joined pieces. Needs `--v8-flags=--expose-gc` (the `test` task sets it).
 */

import assert from "node:assert/strict";
import { utf8Text } from "./reader.ts";

const STRINGS = 20_000;

function forcedGc(): () => void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== "function") {
    throw new Error("this test needs --v8-flags=--expose-gc (as `deno task test` runs it)");
  }
  return gc;
}

function heapAfterGc(gc: () => void): number {
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
}

/** The heap bytes each of {@link STRINGS} kept strings of `length` ASCII characters costs. */
function retainedPerString(gc: () => void, length: number): number {
  const encoder = new TextEncoder();
  // One buffer holding every string, as a list answer holds its items' fields.
  const texts = Array.from(
    { length: STRINGS },
    (_, i) => `v${i.toString(36).padStart(6, "0")}`.padEnd(length, "-abcdef0123456789"),
  );
  const buf = encoder.encode(texts.join(""));
  const kept: string[] = new Array(STRINGS);
  const before = heapAfterGc(gc);
  for (let i = 0; i < STRINGS; i++) kept[i] = utf8Text(buf, i * length, (i + 1) * length);
  const after = heapAfterGc(gc);
  for (let i = 0; i < STRINGS; i += 997) assert.equal(kept[i], texts[i]);
  return (after - before) / STRINGS;
}

Deno.test("utf8Text: a kept string costs a flat string's bytes, for 8 to 64 characters", () => {
  const gc = forcedGc();
  for (const length of [8, 12, 13, 20, 36, 64]) {
    // A flat one-byte string is a 16-byte header (map, hash, length: V8 without pointer
    // compression, as Deno builds it) and its characters, rounded up to 8 bytes; joined from
    // 8-character pieces a 36-character string took 328 bytes, a 20-character one 216.
    const flat = 16 + Math.ceil(length / 8) * 8;
    const measured = retainedPerString(gc, length);
    assert.ok(
      measured <= flat + 16,
      `${length} characters: ${
        measured.toFixed(0)
      } heap bytes per kept string, a flat string ${flat}`,
    );
  }
});
