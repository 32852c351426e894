/**
 * The Kubernetes client and its HTTP/1.1 transport against a hostile or broken server, by class
 * of misbehaviour: bad status lines, bad or conflicting framing headers, bad chunking, bodies
 * longer or shorter than they say or without end, interim answers, endless heads, slow and
 * silent servers, a server closing at every point of an answer, junk on idle connections, watch
 * streams abused line by line, and Kubernetes protobuf answers and watch frames abused field by
 * field (the reads of the table ask for protobuf).
 *
 * Every row runs twice, directly and through the test kit's HTTP proxy (a `CONNECT` tunnel), and
 * asserts three things: the call settles with the expected answer or a clear
 * `ApiError` (its transport cause's kind, or its reason) before the row's deadline; the heap
 * after a forced GC has not grown by more than {@link HEAP_SLACK}; and the same client then
 * gets a good answer from the server.
 *
 * The table runs in the test files of its {@link SHARDS}, `http1_table_<shard>_test.ts`, each named
 * by the sections of the table it runs, so that `deno test --parallel` spreads them over its
 * workers (each row measures its own worker's heap). A new row goes into the table below, in its
 * section.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ApiError, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { type Clock, realClock } from "../../lib/clock.ts";
import { MAX_HEAD_BYTES } from "../../lib/wire/http1/response.ts";
import { isTransportError, type TransportErrorKind } from "../../lib/wire/http1/errors.ts";
import {
  chunked,
  ok,
  type RawExchange,
  RawHttpServer,
  type RawOutcome,
} from "../../testkit/http1/raw_server.ts";
import { plainConnection } from "../../testkit/harness/client_fixtures.ts";
import { ConnectProxy } from "../../testkit/connect_proxy.ts";
import { within } from "../../testkit/harness/within.ts";
import { PROTOBUF_ROWS } from "./http1_protobuf_rows.ts";
import { type Shard, shardRows } from "./shards.ts";

const MiB = 1024 * 1024;
/** How much the heap may grow over a row, after a forced GC. */
const HEAP_SLACK = 8 * MiB;
/** The client's limits in this table: small, so that rows run fast. */
const TIMEOUT_MS = 500;
const MAX_BODY_BYTES = MiB;

const PV_JSON = JSON.stringify({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: { name: "pv1", resourceVersion: "7" },
  spec: {},
});
const GOOD = ok(PV_JSON);
/** What a prior-knowledge HTTP/2 server answers to an HTTP/1.1 request: SETTINGS, GOAWAY. */
const H2_ANSWER = "\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64" +
  "\x00\x00\x34\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01" +
  'bogus greeting "GET / HTTP/1.1\r\nHost: x\r\n\r\n"';
const WATCH_HEAD = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
const ADDED = `{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"8"}}}\n`;
const BOOKMARK = `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n`;

/** Retry waits of no length: a retried GET shows its last failure at once. */
const quickRetries: Clock = {
  now: realClock.now,
  wallNow: realClock.wallNow,
  setTimer: realClock.setTimer,
  sleep: (_ms, signal) => signal?.aborted ? Promise.reject(signal.reason) : Promise.resolve(),
};

/** What a row expects of its call. */
export type Expect =
  /** An answer (for a watch: these event types, then the end). */
  | { ok: true; events?: string[] }
  /**
   * An ApiError `ConnectionError` whose cause is a transport error of this kind (and whose
   * message is `message`).
   */
  | { kind: TransportErrorKind; message?: string }
  /** An ApiError with this reason. */
  | { reason: "Timeout" | "InvalidResponse" }
  /** An ApiError with this HTTP code. */
  | { code: number };

export interface Row {
  name: string;
  /** `get` and `patch` ask for PV `pv1`, `watch` watches VolumeAttachments. */
  call: "get" | "patch" | "watch";
  /** Answers the row's first request; every later request gets a good answer. */
  script: (ex: RawExchange) => Promise<RawOutcome>;
  expect: Expect;
  /** For rows about idle connections: a first good request before the row's one. */
  warmUp?: boolean;
  /** `timeoutSeconds` of a watch row. @default 60 */
  watchSeconds?: number;
  /** The row fails when its call has not settled by then. @default 5000 */
  deadlineMs?: number;
}

/** Writes `text` and closes. */
function send(text: string): Row["script"] {
  return async (ex) => {
    await ex.write(text);
    return "close";
  };
}

/** Writes `text`, then says nothing more and keeps the connection open. */
function sendThenSilence(text: string): Row["script"] {
  return async (ex) => {
    await ex.write(text);
    await ex.sleep(30_000);
    return "close";
  };
}

/** Writes `head`, then `piece` again and again (`delayMs` apart) until the client leaves. */
function endless(head: string, piece: string, delayMs = 0): Row["script"] {
  return async (ex) => {
    await ex.write(head);
    await ex.flood(piece, { delayMs });
    return "close";
  };
}

/** The points at which a server closing in the middle of `answer` is worth a row. */
function cutPoints(answer: string): number[] {
  const headEnd = answer.indexOf("\r\n\r\n") + 4;
  const firstLine = answer.indexOf("\r\n");
  return [
    0,
    5,
    firstLine,
    firstLine + 2,
    Math.floor((firstLine + headEnd) / 2),
    headEnd - 2,
    headEnd,
    headEnd + 3,
    answer.length - 1,
  ];
}

const CHUNKED_GOOD = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
  `Transfer-Encoding: chunked\r\n\r\n${chunked(PV_JSON.slice(0, 20), PV_JSON.slice(20))}`;

export const ROWS: Row[] = [
  // Status lines.
  {
    name: "HTTP/2 status line",
    call: "get",
    script: send("HTTP/2 200 OK\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    // A prior-knowledge HTTP/2 server: its SETTINGS, then a GOAWAY quoting the "bogus greeting".
    name: "HTTP/2 frames: the error quotes them with control characters escaped",
    call: "get",
    script: send(H2_ANSWER),
    expect: {
      kind: "protocol",
      message: 'malformed HTTP response: status line "\\x00\\x00\\x06\\x04\\x00\\x00\\x00' +
        "\\x00\\x00\\x00\\x03\\x00\\x00\\x00d\\x00\\x004\\x07\\x00\\x00\\x00\\x00\\x00" +
        '\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01bogus  …[24 more characters]"',
    },
  },
  {
    name: "four-digit status",
    call: "get",
    script: send("HTTP/1.1 2000 OK\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "no status code",
    call: "get",
    script: send("HTTP/1.1 OK\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "status below 100",
    call: "get",
    script: send("HTTP/1.1 099 Low\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "not HTTP at all",
    call: "get",
    script: send("ICY 200 OK\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "binary junk",
    call: "get",
    script: send("\u0000\u0001\u00ff\u00fe\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "101 nobody asked for",
    call: "get",
    script: send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "status line, then EOF",
    call: "patch",
    script: send("HTTP/1.1 200 OK\r\n"),
    expect: { kind: "eof" },
  },
  {
    name: "error status with a Status body",
    call: "get",
    script: send("HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}"),
    expect: { code: 404 },
  },
  // Field lines.
  {
    name: "field line without a colon",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nno colon\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "space before the colon",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}"),
    expect: { kind: "protocol" },
  },
  {
    name: "obsolete line folding",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 2\r\n\r\n{}"),
    expect: { kind: "protocol" },
  },
  {
    name: "NUL in a value",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nX: a\u0000b\r\nContent-Length: 2\r\n\r\n{}"),
    expect: { kind: "protocol" },
  },
  {
    name: "endless field lines",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\n", "X-Filler: aaaaaaaaaaaaaaaa\r\n"),
    expect: { kind: "too-large" },
  },
  {
    name: "one endless field line",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\nX: ", "a".repeat(4096)),
    expect: { kind: "too-large" },
  },
  // Content-Length and Transfer-Encoding.
  {
    name: "two different Content-Lengths",
    call: "get",
    script: send(
      `HTTP/1.1 200 OK\r\nContent-Length: ${PV_JSON.length}\r\nContent-Length: 3\r\n\r\n${PV_JSON}`,
    ),
    expect: { kind: "protocol" },
  },
  {
    name: "the same Content-Length twice",
    call: "get",
    script: send(
      GOOD.replace("Content-Length", `Content-Length: ${PV_JSON.length}\r\nContent-Length`),
    ),
    expect: { ok: true },
  },
  {
    name: "Content-Length with a sign",
    call: "get",
    script: send(`HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}`),
    expect: { kind: "protocol" },
  },
  {
    name: "negative Content-Length",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "hexadecimal Content-Length",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "Content-Length beside chunked: chunked wins, connection dropped",
    call: "get",
    script: send(
      CHUNKED_GOOD.replace("Transfer-Encoding", "Content-Length: 3\r\nTransfer-Encoding"),
    ),
    expect: { ok: true },
  },
  {
    name: "Transfer-Encoding gzip",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxx"),
    expect: { kind: "protocol" },
  },
  {
    name: "Transfer-Encoding chunked twice",
    call: "get",
    script: send(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ),
    expect: { kind: "protocol" },
  },
  {
    name: "Transfer-Encoding identity",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n{}"),
    expect: { kind: "protocol" },
  },
  {
    name: "body shorter than its length, then EOF",
    call: "patch",
    script: send(`HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n${PV_JSON}`),
    expect: { kind: "eof" },
  },
  {
    name: "body shorter than its length, then silence",
    call: "get",
    script: sendThenSilence(`HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n${PV_JSON}`),
    expect: { reason: "Timeout" },
  },
  {
    name: "body longer than its length",
    call: "get",
    script: send(`${GOOD}trailing junk`),
    expect: { ok: true },
  },
  {
    name: "Content-Length of 100 GB",
    call: "get",
    script: sendThenSilence("HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{"),
    expect: { kind: "too-large" },
  },
  // Chunked bodies.
  {
    name: "chunk size not hexadecimal",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
    expect: { kind: "protocol" },
  },
  {
    name: "endless chunk-size line",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "1".repeat(1024)),
    expect: { kind: "protocol" },
  },
  {
    name: "chunk extensions outweighing the data",
    call: "get",
    script: endless(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
      `1;${"e".repeat(3000)}\r\nx\r\n`,
    ),
    expect: { kind: "protocol" },
  },
  {
    name: "no CRLF after chunk data",
    call: "get",
    script: send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX"),
    expect: { kind: "protocol" },
  },
  {
    name: "chunked body without end, fast",
    call: "get",
    script: endless(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
      `400\r\n${" ".repeat(1024)}\r\n`,
    ),
    expect: { kind: "too-large" },
  },
  {
    name: "chunked body without end, slow",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "1\r\n \r\n", 20),
    expect: { reason: "Timeout" },
  },
  {
    name: "endless trailer section",
    call: "get",
    script: endless(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n",
      "Trailer: aaaaaaaaaaaa\r\n",
    ),
    expect: { kind: "protocol" },
  },
  {
    name: "chunk cut short, then EOF",
    call: "patch",
    script: send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{}"),
    expect: { kind: "eof" },
  },
  // Interim answers.
  {
    name: "100 Continue before the answer",
    call: "get",
    script: send(`HTTP/1.1 100 Continue\r\n\r\n${GOOD}`),
    expect: { ok: true },
  },
  {
    name: "102 Processing before the answer",
    call: "get",
    script: send(`HTTP/1.1 102 Processing\r\n\r\n${GOOD}`),
    expect: { ok: true },
  },
  {
    name: "103 Early Hints three times",
    call: "get",
    script: send(`${"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n".repeat(3)}${GOOD}`),
    expect: { ok: true },
  },
  {
    name: "103 Early Hints without end",
    call: "get",
    script: endless("", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"),
    expect: { kind: "too-large" },
  },
  {
    name: "100 Continue, then silence",
    call: "get",
    script: sendThenSilence("HTTP/1.1 100 Continue\r\n\r\n"),
    expect: { reason: "Timeout" },
  },
  // Bodies without end, slow and silent servers.
  {
    name: "body until close, without end",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", " ".repeat(64 * 1024)),
    expect: { kind: "too-large" },
  },
  {
    name: "body until close, slow without end",
    call: "get",
    script: endless("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", " ", 20),
    expect: { reason: "Timeout" },
  },
  {
    name: "slow server: the answer a byte at a time",
    call: "get",
    script: async (ex) => {
      await ex.trickle(GOOD, 4, 5);
      return "keep";
    },
    expect: { ok: true },
  },
  {
    name: "silent server",
    call: "get",
    script: sendThenSilence(""),
    expect: { reason: "Timeout" },
  },
  {
    name: "half a head, then silence",
    call: "get",
    script: sendThenSilence("HTTP/1.1 200 OK\r\nContent-Le"),
    expect: { reason: "Timeout" },
  },
  // A server closing at every point of an answer (PATCH: a broken connection is not retried).
  ...cutPoints(GOOD).map((at): Row => ({
    name: `closed after ${at} of ${GOOD.length} bytes`,
    call: "patch",
    script: send(GOOD.slice(0, at)),
    expect: { kind: "eof" },
  })),
  ...cutPoints(CHUNKED_GOOD).map((at): Row => ({
    name: `chunked answer closed after ${at} of ${CHUNKED_GOOD.length} bytes`,
    call: "patch",
    script: send(CHUNKED_GOOD.slice(0, at)),
    expect: { kind: "eof" },
  })),
  // Idle connections: what arrives while idle never answers the next request.
  ...[
    ["a 408 on the idle connection", "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"],
    ["an unsolicited answer on the idle connection", ok('{"stale":true}')],
    ["junk on the idle connection", "\u0000junk"],
  ].map(([name, junk]): Row => ({
    name: name!,
    call: "patch",
    warmUp: true,
    script: async (ex) => {
      if (ex.index > 0) {
        await ex.write(GOOD);
        return "keep";
      }
      await ex.write(GOOD);
      await ex.sleep(20);
      await ex.write(junk!);
      await ex.sleep(30_000);
      return "close";
    },
    expect: { ok: true },
  })),
  {
    name: "the idle connection closed by the server",
    call: "patch",
    warmUp: true,
    script: send(GOOD),
    expect: { ok: true },
  },
  // Watch streams.
  {
    name: "watch: one endless line",
    call: "watch",
    script: endless(WATCH_HEAD, "x".repeat(MiB)),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "watch: a line of invalid JSON",
    call: "watch",
    script: send(`${WATCH_HEAD}${ADDED}{"type":\n`),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "watch: an event without an object",
    call: "watch",
    script: send(`${WATCH_HEAD}{"type":"ADDED"}\n`),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "watch: an unknown event type",
    call: "watch",
    script: send(`${WATCH_HEAD}{"type":"PATCHED","object":{}}\n`),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "watch: the last event without a newline",
    call: "watch",
    script: send(`${WATCH_HEAD}${ADDED}${ADDED.trim()}`),
    expect: { ok: true, events: ["ADDED", "ADDED"] },
  },
  {
    name: "watch: an ERROR event",
    call: "watch",
    script: send(
      `${WATCH_HEAD}{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n`,
    ),
    expect: { ok: true, events: ["ERROR"] },
  },
  {
    name: "watch: bookmarks without end",
    call: "watch",
    watchSeconds: 1,
    script: endless(WATCH_HEAD, BOOKMARK, 20),
    expect: { reason: "Timeout" },
  },
  {
    name: "watch: blank lines without end",
    call: "watch",
    watchSeconds: 1,
    script: endless(WATCH_HEAD, "\n\n\n\n", 5),
    expect: { reason: "Timeout" },
  },
  {
    name: "watch: error answer with a body without end",
    call: "watch",
    script: endless(
      "HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n",
      " ".repeat(64 * 1024),
    ),
    expect: { kind: "too-large" },
  },
  {
    name: "watch: head over the limit",
    call: "watch",
    script: send(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(MAX_HEAD_BYTES)}\r\n\r\n`),
    expect: { kind: "too-large" },
  },
  ...PROTOBUF_ROWS,
];

/** The row's call: its outcome, or the error it ended with. */
async function callOf(
  client: KubeClient,
  row: Row,
): Promise<{ events?: string[]; error?: unknown }> {
  try {
    if (row.call === "get") await client.get(PERSISTENT_VOLUMES, "pv1");
    else if (row.call === "patch") {
      await client.patch(PERSISTENT_VOLUMES, "pv1", { type: "merge", body: {} });
    } else {
      const events: string[] = [];
      try {
        for await (
          const ev of client.watch(VOLUME_ATTACHMENTS, {
            resourceVersion: "1",
            timeoutSeconds: row.watchSeconds ?? 60,
            allowWatchBookmarks: true,
            signal: new AbortController().signal,
          })
        ) events.push(ev.type);
      } catch (error) {
        return { events, error };
      }
      return { events };
    }
    return {};
  } catch (error) {
    return { error };
  }
}

/** Fails unless `outcome` is what `expect` says. */
function check(row: Row, outcome: { events?: string[]; error?: unknown }): void {
  const { expect } = row;
  const { error } = outcome;
  const what = `${row.name}: ${
    error instanceof Error ? `${error.name}: ${error.message}` : "no error"
  }`;
  if ("ok" in expect) {
    assert.equal(error, undefined, what);
    if (expect.events !== undefined) assert.deepEqual(outcome.events, expect.events, row.name);
    return;
  }
  assert.ok(error instanceof ApiError, what);
  if ("kind" in expect) {
    assert.equal(error.reason, "ConnectionError", what);
    assert.ok(isTransportError(error.cause, expect.kind), `${what} (expected ${expect.kind})`);
    if (expect.message !== undefined) assert.equal(error.cause.message, expect.message, what);
  } else if ("reason" in expect) {
    assert.equal(error.reason, expect.reason, what);
  } else {
    assert.equal(error.code, expect.code, what);
  }
}

/** Heap in use after a forced GC (`deno task test` runs with --expose-gc). */
function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("this test needs --v8-flags=--expose-gc");
  gc();
  return Deno.memoryUsage().heapUsed;
}

/** Answers every request well. */
async function good(ex: RawExchange): Promise<RawOutcome> {
  await ex.write(GOOD);
  return "keep";
}

/** The test files that share the table, each from the first row of its sections. */
export const SHARDS: readonly Shard[] = [
  // Status lines and field lines.
  { name: "status_and_fields", from: "HTTP/2 status line" },
  // Content-Length, Transfer-Encoding and chunked bodies.
  { name: "body_framing", from: "two different Content-Lengths" },
  // Interim answers, bodies without end, slow, silent and closing servers, idle connections.
  { name: "interim_slow_and_closing", from: "100 Continue before the answer" },
  // Watch streams and Kubernetes protobuf answers.
  { name: "watch_and_protobuf", from: "watch: one endless line" },
];

/** Registers the rows of shard `name` (see {@link SHARDS}) as the steps of one test. */
export function testShard(name: string): void {
  const rows = shardRows(ROWS, SHARDS, name);
  Deno.test(`hostile HTTP/1.1 servers (${name.replaceAll("_", " ")}): every call settles with a clear answer, memory stays bounded, the client goes on`, (t) =>
    runRows(t, rows));
}

/**
 * Every row through an HTTP proxy's CONNECT tunnel (`./http1_table_proxy_test.ts`): the same
 * answers. The heap is measured in the direct run; here rows run a few at a time, so the proxy adds
 * little to the suite's time. The rows about idle connections time what the server does between
 * two requests: they run one at a time, after the others.
 */
export async function runThroughProxy(): Promise<void> {
  await using proxy = ConnectProxy.start();
  const proxyUrl = new URL(proxy.url);
  const queue = ROWS.filter((row) => !row.warmUp);
  const failures: string[] = [];
  const worker = async () => {
    for (let row = queue.shift(); row !== undefined; row = queue.shift()) {
      await runRow(row, proxyUrl).catch((err: unknown) => failures.push(String(err)));
    }
  };
  await Promise.all(Array.from({ length: 6 }, worker));
  for (const row of ROWS.filter((row) => row.warmUp)) {
    await runRow(row, proxyUrl).catch((err: unknown) => failures.push(String(err)));
  }
  assert.deepEqual(failures, []);
  // Every row's request went through a tunnel (and the client's later one, maybe on another).
  assert.ok(proxy.connects.length >= ROWS.length, `${proxy.connects.length} tunnels`);
}

/** Runs `rows` one by one as steps of `t`, directly, with the heap measured around each. */
async function runRows(t: Deno.TestContext, rows: Row[]): Promise<void> {
  for (const row of rows) {
    const before = heapAfterGc();
    await t.step(row.name, () => runRow(row));
    const grown = heapAfterGc() - before;
    assert.ok(grown < HEAP_SLACK, `${row.name}: heap grew by ${grown} bytes`);
  }
}

/** One row against its server, directly or through `proxyUrl`. */
async function runRow(row: Row, proxyUrl?: URL): Promise<void> {
  await using server = RawHttpServer.start(row.script);
  await using client = new KubeClient({
    connection: { ...plainConnection(server.url), ...(proxyUrl && { proxyUrl }) },
    clock: quickRetries,
  }, { timeoutMs: TIMEOUT_MS, watchGraceMs: 0, maxBodyBytes: MAX_BODY_BYTES });
  if (row.warmUp) {
    await client.get(PERSISTENT_VOLUMES, "pv1");
    // Whatever the server does to the idle connection happens now.
    await new Promise((r) => setTimeout(r, 60));
  }
  const outcome = await within(callOf(client, row), row.deadlineMs ?? 5_000, row.name);
  check(row, outcome);
  server.setScript(good);
  const after = await client.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(after.metadata.name, "pv1", `${row.name}: the client works afterwards`);
}
