import assert from "node:assert/strict";
import {
  BodyReader,
  type ByteSource,
  ChunkedDecoder,
  framingOf,
  headEnd,
  latin1,
  MAX_CHUNK_OVERHEAD_BYTES,
  MAX_HEAD_BYTES,
  parseHead,
  readHead,
  ResponseHeaders,
} from "./response.ts";
import { isTransportError } from "./errors.ts";

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

/** A source handing out `pieces` in turn, then the end. */
function source(...pieces: Uint8Array[]): ByteSource & { left(): string } {
  const queue = [...pieces];
  return {
    read: () => Promise.resolve(queue.shift() ?? null),
    unread: (bytes) => void queue.unshift(bytes),
    left: () => dec(queue),
  };
}

/** `text` one byte per piece. */
function bytewise(text: string): Uint8Array[] {
  return [...enc(text)].map((b) => new Uint8Array([b]));
}

Deno.test("readHead: interim answers skipped, the head found whatever the pieces, the rest left", async () => {
  const text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  for (const pieces of [[enc(text)], bytewise(text)]) {
    const src = source(...pieces);
    const head = await readHead(src);
    assert.equal(head.status, 200);
    assert.deepEqual(head.fields.get("content-length"), ["2"]);
    assert.equal(src.left(), "ok");
  }
});

Deno.test("readHead: EOF, 101, and heads over the limit, 1xx heads counted in", async () => {
  const fails = async (kind: string, ...pieces: Uint8Array[]) => {
    const err = await readHead(source(...pieces)).then(() => undefined, (e) => e);
    assert.ok(isTransportError(err, kind as "eof"), `${kind}: ${err}`);
    return err as Error;
  };
  assert.match((await fails("eof")).message, /before the answer/);
  assert.match((await fails("eof", enc("HTTP/1.1 200 OK\r\n"))).message, /in the answer's head/);
  await fails("protocol", enc("HTTP/1.1 101 Switching Protocols\r\n\r\n"));
  await fails("too-large", enc(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(MAX_HEAD_BYTES)}\r\n\r\n`));
  const early = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
  const many = early.repeat(Math.ceil(MAX_HEAD_BYTES / early.length) + 1);
  await fails("too-large", enc(many + "HTTP/1.1 200 OK\r\n\r\n"));
});

Deno.test("parseHead: names must be tokens, values free of CR and NUL, codes at least 100", () => {
  const bad = [
    "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
    "HTTP/1.1 200 OK\r\nName : x\r\n\r\n",
    "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n",
    "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",
    "HTTP/1.1 200 OK\r\nA: b\0\r\n\r\n",
    "HTTP/1.1 099 Low\r\n\r\n",
    "HTTP/1.1 2000 OK\r\n\r\n",
    "HTTP/1.1 20 OK\r\n\r\n",
  ];
  for (const head of bad) {
    assert.throws(() => parseHead(enc(head)), (err) => isTransportError(err, "protocol"), head);
  }
});

Deno.test("framingOf: chunked only, one Content-Length value, both at once not reused", () => {
  const head = (fields: Record<string, string[]>) => ({
    status: 200,
    version: "HTTP/1.1",
    fields: new Map(Object.entries(fields)),
  });
  assert.deepEqual(framingOf("GET", head({ "content-length": ["5", "5"] })), {
    framing: { kind: "length", length: 5 },
    reusable: true,
  });
  assert.deepEqual(framingOf("GET", head({ "transfer-encoding": ["Chunked"] })), {
    framing: { kind: "chunked" },
    reusable: true,
  });
  assert.deepEqual(
    framingOf("GET", head({ "transfer-encoding": ["chunked"], "content-length": ["5"] })),
    { framing: { kind: "chunked" }, reusable: false },
  );
  assert.deepEqual(framingOf("GET", head({})), { framing: { kind: "close" }, reusable: false });
  assert.deepEqual(framingOf("HEAD", head({ "content-length": ["5"] })).framing, {
    kind: "length",
    length: 0,
  });
  const refused: Record<string, string[]>[] = [
    { "transfer-encoding": ["gzip, chunked"] },
    { "transfer-encoding": ["chunked", "chunked"] },
    { "transfer-encoding": ["identity"] },
    { "content-length": ["5", "6"] },
    { "content-length": ["-1"] },
    { "content-length": ["0x10"] },
    { "content-length": ["1".repeat(16)] },
  ];
  for (const fields of refused) {
    assert.throws(
      () => framingOf("GET", head(fields)),
      (err) => isTransportError(err, "protocol"),
      JSON.stringify(fields),
    );
  }
});

Deno.test("ChunkedDecoder: framing overhead, trailers and the CRLF after data are bounded", () => {
  const protocol = (err: unknown) => isTransportError(err, "protocol");
  // One byte per chunk is fine: 5 bytes of framing per byte of data.
  const oneByOne = "1\r\nx\r\n".repeat(20_000) + "0\r\n\r\n";
  assert.equal(decode([enc(oneByOne)]).data.length, 20_000);
  // Kilobytes of extensions per byte of data are not.
  const ext = `1;${"e".repeat(4000)}\r\nx\r\n`;
  assert.throws(
    () => new ChunkedDecoder().push(enc(ext.repeat(Math.ceil(MAX_CHUNK_OVERHEAD_BYTES / 3000)))),
    (err) => protocol(err) && /too much non-data/.test((err as Error).message),
  );
  assert.throws(
    () => new ChunkedDecoder().push(enc(`0\r\n${"T: x\r\n".repeat(20_000)}`)),
    protocol,
  );
  assert.throws(() => new ChunkedDecoder().push(enc("2\r\nab\r\r\n")), protocol);
  assert.throws(() => new ChunkedDecoder().push(enc("2\r\nab\n")), protocol);
});

Deno.test("BodyReader: ends where the framing says, EOF too early is an error, maxBytes holds", async () => {
  const read = async (reader: BodyReader) => {
    const parts: Uint8Array[] = [];
    for (let d = await reader.next(); d !== null; d = await reader.next()) parts.push(...d);
    return dec(parts);
  };
  const sized = new BodyReader(source(enc("hel"), enc("lo")), { kind: "length", length: 5 });
  assert.equal(await read(sized), "hello");
  assert.equal(sized.clean, true);
  const extra = new BodyReader(source(enc("hello!")), { kind: "length", length: 5 });
  assert.equal(await read(extra), "hello");
  assert.equal(extra.clean, false, "bytes past the end: the connection is not reused");
  const chunked = new BodyReader(source(...bytewise("3\r\nabc\r\n0\r\n\r\n")), {
    kind: "chunked",
  });
  assert.equal(await read(chunked), "abc");
  assert.equal(chunked.clean, true);
  await assert.rejects(
    read(new BodyReader(source(enc("hel")), { kind: "length", length: 5 })),
    (err) => isTransportError(err, "eof"),
  );
  assert.throws(
    () => new BodyReader(source(), { kind: "length", length: 11 }, 10),
    (err) => isTransportError(err, "too-large"),
  );
  await assert.rejects(
    read(new BodyReader(source(enc("x".repeat(6)), enc("x".repeat(6))), { kind: "close" }, 10)),
    (err) => isTransportError(err, "too-large"),
  );
  assert.equal(
    await read(
      new BodyReader(source(enc("x".repeat(6)), enc("x".repeat(4))), { kind: "close" }, 10),
    ),
    "x".repeat(10),
  );
});

Deno.test("latin1 decodes as TextDecoder('latin1') does, ASCII and not, short and long", () => {
  const decoder = new TextDecoder("latin1");
  const every = Uint8Array.from({ length: 256 }, (_, i) => i);
  const long = Uint8Array.from({ length: 10_000 }, (_, i) => 32 + (i % 90));
  const longHigh = long.slice();
  longHigh[9_999] = 0x80;
  for (const bytes of [new Uint8Array(0), every, every.subarray(0, 128), long, longHigh]) {
    assert.equal(latin1(bytes), decoder.decode(bytes));
  }
});

Deno.test("parseHead: peer text in errors has its control characters escaped and is bounded", () => {
  const octets = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));
  const cases: [string, string][] = [
    // HTTP/2 frames where a status line should be: a SETTINGS frame, NULs and all.
    [
      "\x00\x00\x12\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64\r\n\r\n",
      'malformed HTTP response: status line "\\x00\\x00\\x12\\x04\\x00\\x00\\x00\\x00\\x00\\x00\\x03\\x00\\x00\\x00d"',
    ],
    ["HTTP/1.1 200 OK\r\nX\x1b[2J: v\r\n\r\n", 'malformed HTTP response: header name "X\\x1b[2J"'],
    [
      `HTTP/1.1 2000 ${"é".repeat(200)}\r\n\r\n`,
      `malformed HTTP response: status line "HTTP/1.1 2000 ${
        "é".repeat(114)
      } …[86 more characters]"`,
    ],
  ];
  for (const [head, message] of cases) {
    assert.throws(() => parseHead(octets(head)), (err: unknown) => {
      assert.ok(isTransportError(err, "protocol"));
      assert.equal(err.message, message);
      return true;
    });
  }
  const framing = parseHead(octets("HTTP/1.1 200 OK\r\nTransfer-Encoding: gz\x07ip\r\n\r\n"));
  assert.throws(
    () => framingOf("GET", framing),
    (err: unknown) => isTransportError(err, "protocol") && err.message.includes('"gz\\x07ip"'),
  );
  const chunks = new ChunkedDecoder();
  assert.throws(
    () => chunks.push(octets("z\x00z\r\n")),
    (err: unknown) =>
      isTransportError(err, "protocol") &&
      err.message === 'malformed chunked encoding: chunk size "z\\x00z\\x0d"',
  );
});
