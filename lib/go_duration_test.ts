import assert from "node:assert/strict";
import { formatGoDuration, parseGoDuration } from "./go_duration.ts";

// Cases from Go's time.ParseDuration documentation and tests, in milliseconds.
const VALID: ReadonlyArray<[string, number]> = [
  ["0", 0],
  ["+0", 0],
  ["-0", 0],
  ["0s", 0],
  ["5s", 5_000],
  ["30s", 30_000],
  ["1478s", 1_478_000],
  ["-5s", -5_000],
  ["+5s", 5_000],
  ["5.0s", 5_000],
  ["5.6s", 5_600],
  ["5.s", 5_000],
  [".5s", 500],
  ["1.004s", 1_004],
  ["1.0040s", 1_004],
  ["100.00100s", 100_001],
  ["10ns", 0.00001],
  ["11us", 0.011],
  ["12µs", 0.012], // U+00B5
  ["12μs", 0.012], // U+03BC
  ["13ms", 13],
  ["300ms", 300],
  ["15m", 900_000],
  ["16h", 57_600_000],
  ["1.5h", 5_400_000],
  ["3h30m", 12_600_000],
  ["2h45m", 9_900_000],
  ["1m30s", 90_000],
  ["10.5s4m", 250_500],
  ["-2m3.4s", -123_400],
  ["1h2m3s4ms5us6ns", 3_723_004.005006],
  ["39h9m14.425s", 140_954_425],
  ["52763797000ns", 52_763.797],
  ["0.3333333333333333333h", 1_200_000],
  ["0.100000000000000000000h", 360_000],
  ["9223372036854775807ns", 9_223_372_036_854.775807],
  ["-9223372036854775808ns", -9_223_372_036_854.775808],
];

for (const [text, ms] of VALID) {
  Deno.test(`parseGoDuration() reads ${JSON.stringify(text)} as ${ms} ms`, () => {
    assert.ok(Math.abs(parseGoDuration(text) - ms) < 1e-9, `${parseGoDuration(text)} != ${ms}`);
  });
}

Deno.test("parseGoDuration() computes exact integer milliseconds for decimal seconds", () => {
  assert.equal(parseGoDuration("1.1s"), 1_100);
  assert.equal(parseGoDuration("0.001s"), 1);
  assert.equal(parseGoDuration("39h9m14.425s"), 140_954_425);
});

const INVALID: ReadonlyArray<[string, string]> = [
  ["", 'time: invalid duration ""'],
  ["3", 'time: missing unit in duration "3"'],
  ["-", 'time: invalid duration "-"'],
  ["s", 'time: invalid duration "s"'],
  [".", 'time: invalid duration "."'],
  ["-.", 'time: invalid duration "-."'],
  [".s", 'time: invalid duration ".s"'],
  ["+.s", 'time: invalid duration "+.s"'],
  ["abc", 'time: invalid duration "abc"'],
  ["1d", 'time: unknown unit "d" in duration "1d"'],
  ["1s ", 'time: unknown unit "s " in duration "1s "'],
  ["1m30", 'time: missing unit in duration "1m30"'],
  ["--1s", 'time: invalid duration "--1s"'],
  ["3000000h", 'time: invalid duration "3000000h"'],
  ["9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'],
  ["-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'],
  ["9223372036854775807ns1ns", 'time: invalid duration "9223372036854775807ns1ns"'],
  ['1"s', 'time: unknown unit "\\"s" in duration "1\\"s"'],
];

for (const [text, message] of INVALID) {
  Deno.test(`parseGoDuration() rejects ${JSON.stringify(text)} with Go's message`, () => {
    assert.throws(() => parseGoDuration(text), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal(err.message, message);
      return true;
    });
  });
}

const FORMATTED: ReadonlyArray<[number, string]> = [
  [0, "0s"],
  [0.000001, "1ns"],
  [0.0011, "1.1µs"],
  [2.2, "2.2ms"],
  [300, "300ms"],
  [999, "999ms"],
  [1_000, "1s"],
  [1_500, "1.5s"],
  [3_300, "3.3s"],
  [15_000, "15s"],
  [60_000, "1m0s"],
  [90_000, "1m30s"],
  [245_000, "4m5s"],
  [245_001, "4m5.001s"],
  [300_000, "5m0s"],
  [600_000, "10m0s"],
  [3_600_000, "1h0m0s"],
  [18_367_001, "5h6m7.001s"],
  [480_000.000001, "8m0.000000001s"],
  [9_900_000, "2h45m0s"],
  [-1_000, "-1s"],
  [-1_500, "-1.5s"],
  [-0.0011, "-1.1µs"],
];

for (const [ms, text] of FORMATTED) {
  Deno.test(`formatGoDuration() writes ${ms} ms as ${JSON.stringify(text)}`, () => {
    assert.equal(formatGoDuration(ms), text);
  });
}

Deno.test("formatGoDuration() output parses back to the same value", () => {
  for (const ms of [1, 17, 1_000, 59_999, 61_001, 3_599_999, 86_400_000, 0.5, 123.456789]) {
    assert.ok(Math.abs(parseGoDuration(formatGoDuration(ms)) - ms) < 1e-9, String(ms));
  }
});

Deno.test("formatGoDuration() rejects non-finite values", () => {
  assert.throws(() => formatGoDuration(Infinity), RangeError);
  assert.throws(() => formatGoDuration(NaN), RangeError);
});
