import assert from "node:assert/strict";
import { formatMicroTime, formatTime } from "./time.ts";

Deno.test("formatMicroTime() always writes six fraction digits in UTC", () => {
  assert.equal(
    formatMicroTime(Date.UTC(2026, 10, 21, 22, 30, 1, 123)),
    "2026-11-21T22:30:01.123000Z",
  );
  assert.equal(formatMicroTime(Date.UTC(2026, 10, 21, 22, 30, 1)), "2026-11-21T22:30:01.000000Z");
  assert.equal(formatMicroTime(0), "1970-01-01T00:00:00.000000Z");
  assert.equal(formatMicroTime(1.5), "1970-01-01T00:00:00.001500Z");
  assert.equal(formatMicroTime(999.9999), "1970-01-01T00:00:00.999999Z", "truncated, not rounded");
  assert.equal(formatMicroTime(-0.5), "1969-12-31T23:59:59.999500Z");
  assert.equal(
    formatMicroTime(Date.UTC(9999, 11, 31, 23, 59, 59, 999)),
    "9999-12-31T23:59:59.999000Z",
  );
});

Deno.test("formatTime() writes whole seconds", () => {
  assert.equal(formatTime(Date.UTC(2026, 10, 21, 22, 30, 1, 999)), "2026-11-21T22:30:01Z");
  assert.equal(formatTime(-1), "1969-12-31T23:59:59Z");
});

Deno.test("formatMicroTime() rejects times it cannot write", () => {
  assert.throws(() => formatMicroTime(Number.NaN), RangeError);
  assert.throws(() => formatMicroTime(Infinity), RangeError);
  assert.throws(() => formatMicroTime(Date.UTC(10000, 0, 1)), RangeError);
  assert.throws(() => formatTime(8.64e15 + 1), RangeError);
});
