import assert from "node:assert/strict";
import { GrpcStatusError } from "./status.ts";
import type { Clock } from "../../clock.ts";
import { FakeClock } from "../../../testkit/fakes/fake_clock.ts";
import { ChannelClosedError, GrpcChannel } from "./channel.ts";
import { parseAddress } from "./address.ts";
import { grpcTimeout } from "./request.ts";
import { decodeGrpcMessage, parseResponse } from "./response.ts";
import {
  encodeFrame,
  ErrorCode,
  Flag,
  FrameType,
  goAwayFrame,
  readUint32,
  rstStreamFrame,
  Setting,
  windowUpdateFrame,
} from "../http2/frames.ts";
import { encodeHeaders, type HeaderField } from "../http2/hpack.ts";
import {
  GRPC_OK_HEADERS,
  grpcDataFrame,
  headersFrame,
  type RawH2Conn,
  startRawH2Server,
} from "../../../testkit/csi/raw_h2_server.ts";

const text = new TextEncoder();
const PATH = "/csi.v1.Identity/Probe";

function grpcStatus(code: number, message?: string): [string, string][] {
  const fields: [string, string][] = [["grpc-status", String(code)]];
  if (message !== undefined) fields.push(["grpc-message", message]);
  return fields;
}

/** Runs `fn` with a channel to a scripted server; both are closed afterwards. */
async function withServer(
  script: (conn: RawH2Conn, index: number) => Promise<void>,
  fn: (channel: GrpcChannel) => Promise<void>,
  options: { backoffMs?: number; window?: number; clock?: Clock } = {},
): Promise<void> {
  const server = await startRawH2Server(script);
  const channel = new GrpcChannel(server.address, {
    backoffMs: options.backoffMs ?? 50,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.window === undefined ? {} : {
      session: { initialWindowSize: options.window, connectionWindowSize: options.window },
    }),
  });
  let failure: unknown;
  try {
    await fn(channel);
  } catch (err) {
    failure = err;
  }
  channel.close();
  // The client's failure first: the server's script often fails because of it.
  await server.close().catch((err) => failure ??= err);
  if (failure !== undefined) throw failure;
}

async function rejection(p: Promise<unknown>): Promise<GrpcStatusError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof GrpcStatusError, `expected a GrpcStatusError, got ${err}`);
  return err;
}

Deno.test("parseAddress() accepts csi-lib-utils' address forms and rejects others", () => {
  assert.deepEqual(parseAddress("/run/csi/socket"), { transport: "unix", path: "/run/csi/socket" });
  assert.deepEqual(parseAddress("unix:///run/csi/socket"), {
    transport: "unix",
    path: "/run/csi/socket",
  });
  assert.deepEqual(parseAddress("unix:/run/csi/socket"), {
    transport: "unix",
    path: "/run/csi/socket",
  });
  assert.deepEqual(parseAddress("127.0.0.1:10000"), {
    transport: "tcp",
    hostname: "127.0.0.1",
    port: 10000,
  });
  assert.deepEqual(parseAddress("[::1]:9"), { transport: "tcp", hostname: "::1", port: 9 });
  assert.deepEqual(parseAddress(":9"), { transport: "tcp", hostname: "localhost", port: 9 });
  assert.throws(() => parseAddress("csi.sock"), /invalid CSI address "csi.sock"/);
  assert.throws(() => parseAddress("host:99999"), /invalid CSI address/);
});

Deno.test("grpcTimeout() fits 8 digits and decodeGrpcMessage() percent-decodes UTF-8", () => {
  assert.equal(grpcTimeout(1500), "1500m");
  assert.equal(grpcTimeout(99_999_999), "99999999m");
  assert.equal(grpcTimeout(100_000_000), "100000S");
  assert.equal(decodeGrpcMessage("vol%20gone%3A%20%C3%BC"), "vol gone: ü");
  assert.equal(decodeGrpcMessage("100%"), "100%");
  assert.equal(decodeGrpcMessage("%zz ok"), "%zz ok");
});

Deno.test("parseResponse() maps HTTP status, content type, missing trailers and framing as grpc-go", () => {
  const ok = GRPC_OK_HEADERS;
  const cases: [Parameters<typeof parseResponse>[0], number, string][] = [
    [
      {
        headers: [[":status", "503"], ["content-type", "text/plain"]],
        data: new Uint8Array(),
        trailers: undefined,
        headersOnly: true,
      },
      14,
      'unexpected HTTP status code received from server: 503 (Service Unavailable); transport: received unexpected content-type "text/plain"',
    ],
    [
      {
        headers: [[":status", "404"]],
        data: new Uint8Array(),
        trailers: undefined,
        headersOnly: true,
      },
      12,
      "unexpected HTTP status code received from server: 404 (Not Found); malformed header: missing HTTP content-type",
    ],
    [
      {
        headers: ok,
        data: grpcDataFrame(1, new Uint8Array([8])).subarray(9),
        trailers: undefined,
        headersOnly: false,
      },
      13,
      "server closed the stream without sending trailers",
    ],
    [
      { headers: ok, data: new Uint8Array(), trailers: [["grpc-status", "x"]], headersOnly: false },
      13,
      "transport: malformed grpc-status: x",
    ],
    [
      { headers: ok, data: new Uint8Array(), trailers: grpcStatus(0), headersOnly: false },
      13,
      "cardinality violation: expected <{}> but got <EOF>",
    ],
    [
      {
        headers: ok,
        data: Uint8Array.of(1, 0, 0, 0, 0),
        trailers: grpcStatus(0),
        headersOnly: false,
      },
      13,
      "grpc: compressed flag set with identity or empty encoding",
    ],
    [
      {
        headers: ok,
        data: Uint8Array.of(0, 0, 0, 0, 9, 1),
        trailers: grpcStatus(0),
        headersOnly: false,
      },
      13,
      "unexpected EOF",
    ],
  ];
  for (const [res, code, message] of cases) {
    const out = parseResponse(res);
    assert.ok(out instanceof GrpcStatusError, message);
    assert.equal(out.code, code, message);
    assert.equal(out.details, message);
  }
  const good = parseResponse({
    headers: ok,
    data: Uint8Array.of(0, 0, 0, 0, 2, 8, 1),
    trailers: grpcStatus(0),
    headersOnly: false,
  });
  assert.deepEqual(good, Uint8Array.of(8, 1));
});

Deno.test("parseResponse() reads grpc-status, :status and the payload format as grpc-go v1.72", () => {
  const ok = GRPC_OK_HEADERS;
  const res = (
    trailers: readonly HeaderField[] | undefined,
    data = new Uint8Array(),
    headers: readonly HeaderField[] = ok,
  ) => ({ headers, data, trailers, headersOnly: false });
  const cases: [ReturnType<typeof res>, number, string][] = [
    // grpc-status must be an int32 (strconv.ParseInt(v, 10, 32)); it is then a uint32 code.
    [
      res([["grpc-status", "100000000000000000000"]]),
      13,
      "transport: malformed grpc-status: 100000000000000000000",
    ],
    [res([["grpc-status", "1e20"]]), 13, "transport: malformed grpc-status: 1e20"],
    [res([["grpc-status", "2147483648"]]), 13, "transport: malformed grpc-status: 2147483648"],
    [res([["grpc-status", ""]]), 13, "transport: malformed grpc-status: "],
    [res([["grpc-status", "17"], ["grpc-message", "m"]]), 17, "m"],
    [res([["grpc-status", "-1"]]), 4294967295, ""],
    [res([["grpc-status", "+5"], ["grpc-status", "3"]]), 3, ""],
    // :status not 200, malformed, or missing with the content type.
    [
      res(undefined, undefined, [[":status", "abc"], ["content-type", "application/grpc"]]),
      13,
      'transport: malformed http-status: strconv.ParseInt: parsing "abc": invalid syntax',
    ],
    [
      res(undefined, undefined, [[":status", "418"], ["content-type", "application/grpc"]]),
      2,
      "unexpected HTTP status code received from server: 418 (I'm a teapot)",
    ],
    [
      res(undefined, undefined, [["content-type", "text/html"]]),
      13,
      'malformed header: missing HTTP status; transport: received unexpected content-type "text/html"',
    ],
    [
      res(undefined, undefined, []),
      13,
      "malformed header: missing HTTP status; malformed header: missing HTTP content-type",
    ],
    [
      res([["grpc-status", "0"], [":status", "500"]]),
      2,
      "unexpected HTTP status code received from server: 500 (Internal Server Error); malformed header: missing HTTP content-type",
    ],
    // The payload: its length first, then its format.
    [
      res(grpcStatus(0), Uint8Array.of(2, 0, 0, 0, 0)),
      13,
      "grpc: received unexpected payload format 2",
    ],
    [
      res(grpcStatus(0), Uint8Array.of(1, 0x00, 0x40, 0x00, 0x01)),
      8,
      "grpc: received message larger than max (4194305 vs. 4194304)",
    ],
    [
      res(grpcStatus(0), Uint8Array.of(1, 0, 0, 0, 0), [...ok, ["grpc-encoding", "gzip"]]),
      13,
      'grpc: Decompressor is not installed for grpc-encoding "gzip"',
    ],
  ];
  for (const [response, code, message] of cases) {
    const out = parseResponse(response);
    assert.ok(out instanceof GrpcStatusError, message);
    assert.deepEqual([out.code, out.details], [code, message]);
  }
});

Deno.test("a call sends the gRPC request headers and the length-prefixed message", async () => {
  let seen: [string, string][] = [];
  let body: Uint8Array = new Uint8Array();
  let settings: [number, number][] = [];
  await withServer(async (conn) => {
    await conn.handshake();
    settings = conn.clientSettings;
    const req = await conn.readRequest();
    seen = req.headers.map(([n, v]) => [n, v]);
    body = req.body;
    await conn.write(
      headersFrame(req.streamId, GRPC_OK_HEADERS),
      grpcDataFrame(req.streamId, Uint8Array.of(0x0a, 0x00)),
      headersFrame(req.streamId, grpcStatus(0), Flag.END_STREAM),
    );
    await conn.readFrame(); // until the client closes
  }, async (channel) => {
    const reply = await channel.unary(PATH, Uint8Array.of(1, 2, 3), 5000);
    assert.deepEqual(reply, Uint8Array.of(0x0a, 0x00));
  });
  const headers = Object.fromEntries(seen);
  assert.equal(headers[":method"], "POST");
  assert.equal(headers[":scheme"], "http");
  assert.equal(headers[":path"], PATH);
  assert.equal(headers[":authority"], "localhost");
  assert.equal(headers["content-type"], "application/grpc");
  assert.equal(headers["te"], "trailers");
  assert.match(headers["grpc-timeout"]!, /^(4\d{3}|5000)m$/);
  assert.deepEqual(body, Uint8Array.of(0, 0, 0, 0, 3, 1, 2, 3));
  assert.deepEqual(settings, [
    [Setting.ENABLE_PUSH, 0],
    [Setting.INITIAL_WINDOW_SIZE, 4 << 20],
    [Setting.MAX_HEADER_LIST_SIZE, 1 << 20],
  ]);
});

Deno.test("a trailers-only error gives the status and the percent-decoded message", async () => {
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    await conn.write(
      headersFrame(
        req.streamId,
        [...GRPC_OK_HEADERS, ...grpcStatus(5, "vol%20gone%3A%20%C3%BC")],
        Flag.END_STREAM,
      ),
    );
    await conn.readFrame();
  }, async (channel) => {
    const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(err.code, 5);
    assert.equal(err.message, "rpc error: code = NotFound desc = vol gone: ü");
  });
});

Deno.test("responses split over reads, padded, with priority and CONTINUATION frames, and a PING are handled", async () => {
  let pingAck: Uint8Array | undefined;
  const scriptDone = Promise.withResolvers<void>();
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    const id = req.streamId;
    const block = encodeHeaders([...GRPC_OK_HEADERS, ["x-long", "v".repeat(300)]]);
    // HEADERS: padded (3 bytes of padding) with a priority block, then two CONTINUATIONs.
    const first = new Uint8Array([3, 0, 0, 0, 0, 16, ...block.subarray(0, 10), 0, 0, 0]);
    const frames = [
      encodeFrame(FrameType.HEADERS, Flag.PADDED | Flag.PRIORITY, id, first),
      encodeFrame(FrameType.PING, 0, 0, text.encode("pingpong")),
      encodeFrame(FrameType.CONTINUATION, 0, id, block.subarray(10, 100)),
      encodeFrame(FrameType.CONTINUATION, Flag.END_HEADERS, id, block.subarray(100)),
    ];
    // A PING may not come between HEADERS and CONTINUATION: send it first instead.
    const ordered = [frames[1]!, frames[0]!, frames[2]!, frames[3]!];
    const message = grpcDataFrame(id, text.encode("hello")).subarray(9);
    const paddedData = new Uint8Array([4, ...message, 0, 0, 0, 0]);
    ordered.push(encodeFrame(FrameType.DATA, Flag.PADDED, id, paddedData));
    ordered.push(headersFrame(id, grpcStatus(0), Flag.END_STREAM));
    const all = ordered.reduce((acc, f) => new Uint8Array([...acc, ...f]), new Uint8Array());
    await conn.writeSlowly(all);
    const ack = await conn.expectFrame((f) => f.type === FrameType.PING, "PING ack");
    assert.equal(ack.flags & Flag.ACK, Flag.ACK);
    pingAck = ack.payload;
    scriptDone.resolve();
    await conn.readFrame();
  }, async (channel) => {
    const reply = await channel.unary(PATH, new Uint8Array(), 5000);
    assert.equal(new TextDecoder().decode(reply), "hello");
    await scriptDone.promise;
  });
  assert.equal(new TextDecoder().decode(pingAck), "pingpong");
});

Deno.test("a non-200 HTTP status maps to the gRPC code as grpc-go maps it", async () => {
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    await conn.write(
      headersFrame(
        req.streamId,
        [[":status", "503"], ["content-type", "text/html"]],
        Flag.END_STREAM,
      ),
    );
    await conn.readFrame();
  }, async (channel) => {
    const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(err.code, 14);
    assert.equal(
      err.details,
      'unexpected HTTP status code received from server: 503 (Service Unavailable); transport: received unexpected content-type "text/html"',
    );
  });
});

Deno.test("RST_STREAM from the server fails the call with the mapped code", async () => {
  const codes = [ErrorCode.CANCEL, ErrorCode.REFUSED_STREAM, ErrorCode.INTERNAL_ERROR];
  await withServer(async (conn) => {
    await conn.handshake();
    for (const code of codes) {
      const req = await conn.readRequest();
      await conn.write(rstStreamFrame(req.streamId, code));
    }
    await conn.readFrame();
  }, async (channel) => {
    const got = [];
    for (let i = 0; i < codes.length; i++) {
      const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
      got.push([err.code, err.details]);
    }
    assert.deepEqual(got, [
      [1, "stream terminated by RST_STREAM with error code: CANCEL"],
      [14, "stream terminated by RST_STREAM with error code: REFUSED_STREAM"],
      [13, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR"],
    ]);
  });
});

Deno.test("the deadline resets the stream with CANCEL and gives code 4 'context deadline exceeded'", async () => {
  const clock = new FakeClock();
  let reset: number | undefined;
  let timeoutHeader = "";
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    timeoutHeader = Object.fromEntries(req.headers)["grpc-timeout"] ?? "";
    const rst = await conn.expectFrame((f) => f.type === FrameType.RST_STREAM, "RST_STREAM");
    assert.equal(rst.streamId, req.streamId);
    reset = readUint32(rst.payload, 0);
    // Answering after the reset must not disturb the client.
    await conn.write(headersFrame(req.streamId, GRPC_OK_HEADERS));
    await conn.readFrame();
  }, async (channel) => {
    const call = rejection(channel.unary(PATH, new Uint8Array(), 150));
    while (timeoutHeader === "") await new Promise((r) => setTimeout(r, 5));
    clock.advance(150);
    const err = await call;
    assert.equal(
      err.message,
      "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
    );
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(channel.state, "READY", "the connection survives a cancelled stream");
  }, { clock });
  assert.equal(reset, ErrorCode.CANCEL);
  assert.equal(timeoutHeader, "150m");
});

Deno.test("the call deadline and the grpc-timeout follow the injected clock", async () => {
  const clock = new FakeClock();
  let timeoutHeader = "";
  let reset = false;
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    timeoutHeader = Object.fromEntries(req.headers)["grpc-timeout"] ?? "";
    await conn.expectFrame((f) => f.type === FrameType.RST_STREAM, "RST_STREAM");
    reset = true;
  }, async (channel) => {
    let settled = false;
    const call = rejection(channel.unary(PATH, new Uint8Array(), 60_000));
    call.finally(() => settled = true);
    while (timeoutHeader === "") await new Promise((r) => setTimeout(r, 5));
    clock.advance(59_999);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(settled, false, "one millisecond before the deadline on the clock");
    clock.advance(1);
    const err = await call;
    assert.equal(err.code, 4);
    assert.equal(err.details, "context deadline exceeded");
    while (!reset) await new Promise((r) => setTimeout(r, 5));
  }, { clock });
  assert.equal(timeoutHeader, "60000m");
});

Deno.test("GOAWAY: streams above last-stream-id fail Unavailable, lower ones finish, the channel goes IDLE and reconnects", async () => {
  const states: string[] = [];
  await withServer(async (conn, index) => {
    await conn.handshake();
    if (index === 0) {
      const a = await conn.readRequest();
      const b = await conn.readRequest();
      await conn.write(goAwayFrame(a.streamId, ErrorCode.NO_ERROR));
      await new Promise((r) => setTimeout(r, 20));
      await conn.write(
        headersFrame(a.streamId, GRPC_OK_HEADERS),
        grpcDataFrame(a.streamId, text.encode("a")),
        headersFrame(a.streamId, grpcStatus(0), Flag.END_STREAM),
      );
      assert.ok(b.streamId > a.streamId);
      // The client closes the drained connection by itself.
      assert.equal(await conn.readFrame().then((f) => f?.type), undefined);
    } else {
      const c = await conn.readRequest();
      await conn.write(
        headersFrame(c.streamId, GRPC_OK_HEADERS),
        grpcDataFrame(c.streamId, text.encode("c")),
        headersFrame(c.streamId, grpcStatus(0), Flag.END_STREAM),
      );
      await conn.readFrame();
    }
  }, async (channel) => {
    channel.onStateChange((s) => states.push(s));
    const a = channel.unary(PATH, new Uint8Array(), 5000);
    await new Promise((r) => setTimeout(r, 30));
    const b = channel.unary(PATH, new Uint8Array(), 5000);
    const errB = await rejection(b);
    assert.equal(errB.code, 14);
    assert.equal(errB.details, "the stream is rejected because server is draining the connection");
    assert.equal(new TextDecoder().decode(await a), "a");
    assert.equal(new TextDecoder().decode(await channel.unary(PATH, new Uint8Array(), 5000)), "c");
  });
  assert.deepEqual(states.slice(0, 4), ["CONNECTING", "READY", "IDLE", "CONNECTING"]);
});

Deno.test("a connection closed mid-call fails it with Unavailable 'error reading from server: EOF'", async () => {
  await withServer(async (conn) => {
    await conn.handshake();
    await conn.readRequest();
    conn.close();
  }, async (channel) => {
    const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(err.code, 14);
    assert.equal(err.details, "error reading from server: EOF");
    assert.equal(channel.state, "IDLE");
  });
});

Deno.test("a protocol violation by the server ends the connection with GOAWAY PROTOCOL_ERROR", async () => {
  let goAwayCode: number | undefined;
  const scriptDone = Promise.withResolvers<void>();
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    // DATA on a stream the client never opened.
    await conn.write(encodeFrame(FrameType.DATA, 0, req.streamId + 2, Uint8Array.of(1)));
    const goAway = await conn.expectFrame((f) => f.type === FrameType.GOAWAY, "GOAWAY");
    goAwayCode = readUint32(goAway.payload, 4);
    scriptDone.resolve();
  }, async (channel) => {
    const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(err.code, 14);
    assert.match(err.details, /^connection error: PROTOCOL_ERROR: DATA on idle stream \d+$/);
    await scriptDone.promise;
  });
  assert.equal(goAwayCode, ErrorCode.PROTOCOL_ERROR);
});

Deno.test("flow control: a response far larger than the windows flows as the client sends WINDOW_UPDATEs", async () => {
  const size = 1024 * 1024;
  const window = 65_535;
  let updates = 0;
  await withServer(async (conn) => {
    await conn.handshake();
    const req = await conn.readRequest();
    const id = req.streamId;
    const payload = new Uint8Array(5 + size);
    new DataView(payload.buffer).setUint32(1, size);
    for (let i = 5; i < payload.length; i++) payload[i] = i % 251;
    let connWindow = window;
    let streamWindow = window;
    let offset = 0;
    await conn.write(headersFrame(id, GRPC_OK_HEADERS));
    while (offset < payload.length) {
      const n = Math.min(16_384, connWindow, streamWindow, payload.length - offset);
      if (n === 0) {
        const f = await conn.expectFrame((f) => f.type === FrameType.WINDOW_UPDATE, "update");
        const inc = readUint32(f.payload, 0);
        if (f.streamId === 0) connWindow += inc;
        else streamWindow += inc;
        updates++;
        continue;
      }
      await conn.write(encodeFrame(FrameType.DATA, 0, id, payload.subarray(offset, offset + n)));
      offset += n;
      connWindow -= n;
      streamWindow -= n;
    }
    await conn.write(headersFrame(id, grpcStatus(0), Flag.END_STREAM));
    await conn.readFrame();
  }, async (channel) => {
    const reply = await channel.unary(PATH, new Uint8Array(), 10_000);
    assert.equal(reply.length, size);
    assert.ok(reply.every((b, i) => b === (i + 5) % 251));
  }, { window });
  assert.ok(updates >= 2 * Math.floor(size / window) - 2, `${updates} updates`);
});

Deno.test("flow control: the client sends DATA within the server's windows and frame size", async () => {
  const size = 100_000;
  const frameSizes: number[] = [];
  await withServer(async (conn) => {
    // A small stream window: the client must wait for our WINDOW_UPDATEs.
    await conn.handshake([[Setting.INITIAL_WINDOW_SIZE, 1000]]);
    let headersId = 0;
    const body: number[] = [];
    for (;;) {
      const f = await conn.expectFrame(() => true, "request frames");
      if (f.type === FrameType.HEADERS) headersId = f.streamId;
      if (f.type !== FrameType.DATA) continue;
      frameSizes.push(f.payload.length);
      body.push(...f.payload);
      if (f.flags & Flag.END_STREAM) break;
      await conn.write(
        windowUpdateFrame(0, f.payload.length),
        windowUpdateFrame(f.streamId, f.payload.length),
      );
    }
    assert.equal(body.length, size + 5);
    assert.ok(body.slice(5).every((b, i) => b === i % 7));
    await conn.write(
      headersFrame(headersId, [...GRPC_OK_HEADERS, ...grpcStatus(0)], Flag.END_STREAM),
    );
    await conn.readFrame();
  }, async (channel) => {
    const message = Uint8Array.from({ length: size }, (_, i) => i % 7);
    const err = await rejection(channel.unary(PATH, message, 10_000));
    // Trailers-only OK without a message: grpc-go's cardinality error, the request went through.
    assert.equal(err.code, 13);
  });
  assert.ok(frameSizes.every((n) => n <= 1000), `frame sizes ${frameSizes.slice(0, 5)}`);
  assert.equal(frameSizes.reduce((a, b) => a + b, 0), size + 5);
});

Deno.test("SETTINGS_MAX_CONCURRENT_STREAMS: a second call waits for the first stream to end", async () => {
  const order: string[] = [];
  await withServer(async (conn) => {
    await conn.handshake([[Setting.MAX_CONCURRENT_STREAMS, 1]]);
    const a = await conn.readRequest();
    order.push("server got a");
    const second = conn.readRequest();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const early = await Promise.race([
      second.then(() => "second request"),
      new Promise((r) => timer = setTimeout(() => r("nothing"), 100)),
    ]);
    clearTimeout(timer);
    order.push(`while a open: ${early}`);
    await conn.write(
      headersFrame(a.streamId, [...GRPC_OK_HEADERS, ...grpcStatus(3, "a")], Flag.END_STREAM),
    );
    const b = (await second).streamId;
    await conn.write(headersFrame(b, [...GRPC_OK_HEADERS, ...grpcStatus(3, "b")], Flag.END_STREAM));
    await conn.readFrame();
  }, async (channel) => {
    const a = rejection(channel.unary(PATH, new Uint8Array(), 5000));
    const b = rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal((await a).details, "a");
    assert.equal((await b).details, "b");
  });
  assert.deepEqual(order, ["server got a", "while a open: nothing"]);
});

Deno.test("no listener: the call fails at once with grpc-go's dial error, and the channel retries after the backoff", async () => {
  const dir = await Deno.makeTempDir();
  const clock = new FakeClock();
  const channel = new GrpcChannel(`${dir}/none.sock`, { backoffMs: 50, clock });
  const states: string[] = [];
  channel.onStateChange((s) => states.push(s));
  try {
    const err = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(err.code, 14);
    assert.equal(
      err.details,
      `connection error: desc = "transport: Error while dialing: dial unix ${dir}/none.sock: connect: no such file or directory"`,
    );
    const again = await rejection(channel.unary(PATH, new Uint8Array(), 5000));
    assert.equal(again.details, err.details, "in TRANSIENT_FAILURE calls fail fast");
    const connecting = () => states.filter((s) => s === "CONNECTING").length;
    assert.equal(connecting(), 1, states.join(","));
    clock.advance(49);
    assert.equal(connecting(), 1, `no retry before the backoff: ${states.join(",")}`);
    clock.advance(1);
    assert.equal(connecting(), 2, `retried after the backoff: ${states.join(",")}`);
  } finally {
    channel.close();
    await Deno.remove(dir, { recursive: true });
  }
  const closed = await channel.unary(PATH, new Uint8Array(), 5000).then(() => 0, (e: unknown) => e);
  assert.ok(closed instanceof ChannelClosedError, "not a gRPC status: code undefined");
});

Deno.test("the server's text in a status is quoted safe: controls escaped, UTF-8 kept, bounded", () => {
  const ok: HeaderField[] = [[":status", "200"], ["content-type", "application/grpc"]];
  const status = (headers: HeaderField[], trailers: HeaderField[]) => {
    const out = parseResponse({ headers, data: new Uint8Array(), trailers, headersOnly: false });
    assert.ok(out instanceof GrpcStatusError);
    return out.details;
  };
  // grpc-message: percent-decoded, then made safe; a driver's words in any script stay readable.
  assert.equal(
    status(ok, grpcStatus(13, "Datentr%C3%A4ger %E5%8D%B7: %1B[31mkaputt%00%0Anext")),
    "Datenträger 卷: \\x1b[31mkaputt\\x00\\x0anext",
  );
  const long = status(ok, grpcStatus(13, "x".repeat(5000)));
  assert.equal(long, `${"x".repeat(4096)} …[904 more characters]`);
  // Header values quoted in grpc-go's texts: escaped already, now bounded too.
  assert.equal(
    status(ok, [["grpc-status", "1\x1b[2J"]]),
    "transport: malformed grpc-status: 1\\x1b[2J",
  );
  const contentType = status([[":status", "200"], ["content-type", `text/${"h".repeat(400)}`]], []);
  assert.match(
    contentType,
    /^transport: received unexpected content-type "text\/h+ …\[\d+ more characters\]$/,
  );
  assert.ok(contentType.length < 350, `${contentType.length}`);
});
