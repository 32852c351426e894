/**
 * Text received from a peer (an HTTP status line or header value, a `grpc-message`, a Kubernetes
 * Status message, a driver's error text) made safe to quote in an error message, a log field, an
 * Event or a VolumeAttachment status: control characters are escaped and the length is bounded.
 *
 * - C0 controls (U+0000–U+001F), DEL (U+007F) and C1 controls (U+0080–U+009F) become `\xNN`, so
 *   a NUL, an escape sequence or a line break from the peer cannot reach a terminal or split a
 *   log line;
 * - the line and paragraph separators (U+2028, U+2029), the bidirectional embedding, override and
 *   isolate controls (U+202A–U+202E, U+2066–U+2069, the "Trojan Source" characters of
 *   CVE-2021-42574) and unpaired surrogates become `\uNNNN`;
 * - everything else, printable UTF-8 in any script included, is kept as it is: a driver's error
 *   text stays readable;
 * - at most {@link PEER_TEXT_MAX} characters of output (an escape counts with its length), then
 *   ` …[N more characters]`, N counted in the peer's text.
 *
 * The escaping is for reading, not a reversible encoding: a backslash from the peer stays a
 * backslash.
 *
 * @module
 */

/** The most characters {@link peerText} keeps by default: 4096. */
export const PEER_TEXT_MAX = 4096;

/** What {@link peerText} escapes (control characters are what it looks for). */
const UNSAFE =
  // deno-lint-ignore no-control-regex
  /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function escapeChar(c: string): string {
  const code = c.charCodeAt(0);
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, "0")}`;
  return `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `text` with control characters escaped and at most `max` characters long (see the module
 * documentation).
 *
 * ```ts
 * import { peerText } from "./peer_text.ts";
 * peerText("disk \x1b[31mgone\x00"); // "disk \\x1b[31mgone\\x00"
 * peerText("ボリュームが見つかりません"); // unchanged
 * ```
 */
export function peerText(text: string, max: number = PEER_TEXT_MAX): string {
  if (text.length <= max && !UNSAFE.test(text)) return text;
  let out = "";
  let used = 0;
  for (const c of text) {
    const piece = c.length === 1 && UNSAFE.test(c) ? escapeChar(c) : c;
    if (out.length + piece.length > max) {
      return `${out} …[${text.length - used} more characters]`;
    }
    out += piece;
    used += c.length;
  }
  return out;
}
