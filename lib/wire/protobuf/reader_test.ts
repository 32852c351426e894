import assert from "node:assert/strict";
import { utf8Text } from "./reader.ts";

Deno.test("utf8Text: every length from 0 to 70 bytes, ASCII and not, at any offset", () => {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  for (let length = 0; length <= 70; length++) {
    const ascii = Array.from({ length }, (_, i) => String.fromCharCode(0x21 + (i * 7) % 90))
      .join("");
    assert.equal(utf8Text(encoder.encode(`ab${ascii}cd`), 2, 2 + length), ascii);
    if (length === 0) continue;
    // One two-byte character anywhere in the text: decoded as UTF-8, never as single bytes.
    for (const at of [0, Math.floor(length / 2), length - 1]) {
      const text = `${ascii.slice(0, at)}é${ascii.slice(at + 1)}`;
      const bytes = encoder.encode(`x${text}`);
      assert.equal(utf8Text(bytes, 1, bytes.length), text);
    }
  }
  // A malformed sequence becomes U+FFFD, as in TextDecoder (and Go's JSON encoder).
  const malformed = new Uint8Array([0x61, 0xff, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69]);
  for (const to of [3, 9, 10]) {
    assert.equal(utf8Text(malformed, 0, to), decoder.decode(malformed.subarray(0, to)));
  }
});
