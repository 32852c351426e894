import assert from "node:assert/strict";
import { PEER_TEXT_MAX, peerText } from "./peer_text.ts";

Deno.test("peerText escapes C0, DEL and C1 controls as \\xNN", () => {
  assert.equal(
    peerText("a\x00b\x1b[31mc\r\nd\x7fe\x85f\tg"),
    "a\\x00b\\x1b[31mc\\x0d\\x0ad\\x7fe\\x85f\\x09g",
  );
});

Deno.test("peerText escapes line separators, bidi controls and unpaired surrogates as \\uNNNN", () => {
  assert.equal(peerText("x\u2028y\u202ez\u2066"), "x\\u2028y\\u202ez\\u2066");
  assert.equal(peerText("a\ud800b\udc00"), "a\\ud800b\\udc00");
});

Deno.test("peerText keeps printable UTF-8 of any script unchanged", () => {
  for (
    const text of [
      'rpc error: volume "vol-1" not found (attempt 3/5) \\ path C:\\x',
      "ボリュームが見つかりません",
      "Datenträger nicht gefunden — ошибка 🚫",
      "\u{1f600} a pair of surrogates",
    ]
  ) assert.equal(peerText(text), text);
});

Deno.test("peerText bounds the length, escapes counted, and says how much it cut", () => {
  const long = "é".repeat(PEER_TEXT_MAX + 10);
  const out = peerText(long);
  assert.equal(out, `${"é".repeat(PEER_TEXT_MAX)} …[10 more characters]`);
  assert.equal(peerText("\x00".repeat(10), 8), "\\x00\\x00 …[8 more characters]");
  // A surrogate pair is never cut in two.
  assert.equal(peerText("ab\u{1f600}", 3), "ab …[2 more characters]");
  assert.equal(peerText("abc", 3), "abc");
});
