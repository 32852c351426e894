import assert from "node:assert/strict";
import { formatNumber, formatRatio, formatTable } from "./table.ts";

Deno.test("formatTable() aligns the first column left and the others right", () => {
  const text = formatTable(["figure", "A"], [["attaches / s", "12.5"], ["p99 (s)", "0.25"]]);
  assert.equal(
    text,
    [
      "| figure       |    A |",
      "|:-------------|-----:|",
      "| attaches / s | 12.5 |",
      "| p99 (s)      | 0.25 |",
    ].join("\n"),
  );
});

Deno.test("formatNumber() prints dashes for missing figures and keeps tiny values visible", () => {
  assert.equal(formatNumber(1.234, 2), "1.23");
  assert.equal(formatNumber(NaN, 2), "–");
  assert.equal(formatNumber(Infinity, 1), "–");
  assert.equal(formatNumber(0, 2), "0.00");
  assert.equal(formatNumber(0.001, 2), "0.0010");
});

Deno.test("formatRatio() divides the second by the first", () => {
  assert.equal(formatRatio(2, 1), "0.50");
  assert.equal(formatRatio(0, 1), "–");
  assert.equal(formatRatio(NaN, 1), "–");
});
