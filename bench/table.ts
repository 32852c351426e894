/**
 * Plain-text tables for the terminal (and for Markdown: every row is `| … |`).
 *
 * @module
 */

/**
 * Formats rows under a header as a Markdown table with aligned columns: the first column is
 * left-aligned, the others right-aligned. Rows shorter than the header are padded with "".
 *
 * @example
 * ```ts
 * formatTable(["figure", "A"], [["attaches/s", "12.5"]]);
 * // | figure     |    A |
 * // |:-----------|-----:|
 * // | attaches/s | 12.5 |
 * ```
 */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const width = header.map((h, i) =>
    Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length), 3)
  );
  const cell = (text: string, i: number) =>
    i === 0 ? text.padEnd(width[i] as number) : text.padStart(width[i] as number);
  const line = (cells: readonly string[]) =>
    `| ${header.map((_, i) => cell(cells[i] ?? "", i)).join(" | ")} |`;
  const rule = `|${
    width.map((w, i) => (i === 0 ? `:${"-".repeat(w + 1)}` : `${"-".repeat(w + 1)}:`)).join("|")
  }|`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

/**
 * A number with `digits` decimals, trimmed to at most four significant decimals for small
 * values; "–" for NaN and infinities.
 */
export function formatNumber(value: number, digits: number): string {
  if (!Number.isFinite(value)) return "–";
  if (value !== 0 && Math.abs(value) < 10 ** -digits) {
    return value.toPrecision(2);
  }
  return value.toFixed(digits);
}

/** `b / a` with two decimals, "–" when it is undefined. */
export function formatRatio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || a === 0) return "–";
  return (b / a).toFixed(2);
}
