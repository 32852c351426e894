import assert from "node:assert/strict";
import { ChunkedDecoder, headEnd, parseHead, ResponseHeaders } from "./response.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (parts: Uint8Array[]) => new TextDecoder().decode(concat(parts));
function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Decodes `pieces` in turn; the data, and the bytes after the body. */
function decode(pieces: Uint8Array[]): { data: string; rest: string; done: boolean } {
  const decoder = new ChunkedDecoder();
  const data: Uint8Array[] = [];
  const rest: Uint8Array[] = [];
  for (const piece of pieces) {
    if (decoder.done) {
      rest.push(piece);
      continue;
    }
    const out = decoder.push(piece);
    data.push(...out.data);
    if (out.done && out.rest !== undefined) rest.push(out.rest);
  }
  return { data: dec(data), rest: dec(rest), done: decoder.done };
}

const BODY = "5;name=value\r\nhello\r\n1a\r\n, a chunk of 26 bytes ....\r\n" +
  "1\r\n\n\r\n0\r\nTrailer-One: x\r\nTrailer-Two: y\r\n\r\n";
const DATA = "hello, a chunk of 26 bytes ....\n";
const NEXT = "HTTP/1.1 200 OK\r\n";

Deno.test("ChunkedDecoder: the same data and rest whatever two pieces the input is split into", () => {
  const input = enc(BODY + NEXT);
  for (let at = 0; at <= input.length; at++) {
    const got = decode([input.subarray(0, at), input.subarray(at)]);
    assert.deepEqual(got, { data: DATA, rest: NEXT, done: true }, `split at ${at}`);
  }
  const bytes = [...input].map((b) => new Uint8Array([b]));
  assert.deepEqual(decode(bytes), { data: DATA, rest: NEXT, done: true }, "byte by byte");
});

Deno.test("ChunkedDecoder: data is handed out as views of the input, not copies", () => {
  const input = enc("3\r\nabc\r\n0\r\n\r\n");
  const out = new ChunkedDecoder().push(input);
  assert.equal(out.data.length, 1);
  assert.equal(out.data[0]!.buffer, input.buffer);
  assert.equal(out.data[0]!.byteOffset, 3);
});

Deno.test("ChunkedDecoder: an unfinished body is not done; malformed framing throws", () => {
  assert.deepEqual(decode([enc("5\r\nhel")]), { data: "hel", rest: "", done: false });
  assert.deepEqual(decode([enc("0\r\n")]), { data: "", rest: "", done: false });
  assert.throws(() => new ChunkedDecoder().push(enc("zz\r\n")), /chunk size "zz/);
  assert.throws(() => new ChunkedDecoder().push(enc("2\r\nabXY")), /no CRLF after data/);
  assert.throws(() => new ChunkedDecoder().push(enc("1".repeat(5000))), /too long/);
});

Deno.test("parseHead: status, version, repeated fields joined as fetch joins them, case-insensitive", () => {
  const raw = enc(
    "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nWarning: a\r\nwarning:  b \r\n\r\nbody",
  );
  const end = headEnd(raw);
  assert.equal(new TextDecoder().decode(raw.subarray(end)), "body");
  const head = parseHead(raw.subarray(0, end));
  assert.equal(head.status, 404);
  assert.equal(head.version, "HTTP/1.1");
  const headers = new ResponseHeaders(head.fields);
  assert.equal(headers.get("WARNING"), "a, b");
  assert.equal(headers.get("content-type"), "application/json");
  assert.equal(headers.get("retry-after"), null);
  assert.equal(parseHead(enc("HTTP/1.0 200\r\n\r\n")).status, 200);
  assert.throws(() => parseHead(enc("HTTP/2 200 OK\r\n\r\n")), /malformed HTTP response/);
  assert.throws(() => parseHead(enc("HTTP/1.1 200 OK\r\nno colon\r\n\r\n")), /malformed/);
});

Deno.test("headEnd: found across the search start, -1 until the empty line", () => {
  const raw = enc("HTTP/1.1 200 OK\r\nA: b\r\n\r\n");
  assert.equal(headEnd(raw.subarray(0, raw.length - 1)), -1);
  for (let from = 0; from < raw.length; from++) assert.equal(headEnd(raw, from), raw.length);
});
