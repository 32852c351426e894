/**
 * Memory and time of one large gRPC answer cut into DATA frames of a given size (the "data
 * dribble" of CVE-2019-9511 from the client's side), with the server in another process:
 *
 * ```sh
 * deno run -A bench/h2_frame_size.ts                     # 16384, 64, 8 and 1 octets, 3 MiB
 * deno run -A bench/h2_frame_size.ts --sizes=1 --mib=3
 * ```
 *
 * For each frame size it starts a server process (the test kit's raw HTTP/2 peer, which sends
 * the answer as prepared bytes) and a client process (our gRPC channel). The client makes a
 * small call first, then resets its peak RSS (`/proc/self/clear_refs` 5) and makes the large
 * call; it reports the peak RSS growth (`VmHWM` after minus `VmRSS` before), the largest live
 * heap seen, the call's time and outcome, and how late a 10 ms timer ran at worst meanwhile.
 * This process polls the client's `/healthz` (`lib/observe/http_server.ts`) every 20 ms during
 * the call and reports the slowest answer: the attacher's other work must go on during a flood
 * of tiny frames.
 *
 * Every process stops by itself: the server after its second connection or 120 s, the client
 * after its call.
 *
 * @module
 */

import { GrpcChannel } from "../lib/wire/grpc/channel.ts";
import { GrpcStatusError } from "../lib/wire/grpc/status.ts";
import { startHttpServer } from "../lib/observe/http_server.ts";
import { nullLogger } from "../lib/observe/logger.ts";
import { frame, T } from "../testkit/h2/frame_codec.ts";
import { GRPC_HEADERS, grpcTrailers, headers, startRawPeer } from "../testkit/h2/raw_peer.ts";

const SELF = new URL(import.meta.url).pathname;
const PATH = "/csi.v1.Controller/ListVolumes";

/** The answer to a request of `size` octets: an empty message, or `mib` MiB in `frameSize`. */
function answerBytes(streamId: number, mib: number, frameSize: number): Uint8Array {
  const length = Math.round(mib * 1024 * 1024);
  const data = new Uint8Array(5 + length);
  new DataView(data.buffer).setUint32(1, length);
  for (let i = 5; i < data.length; i++) data[i] = i & 0x7f;
  const head = headers(streamId, [...GRPC_HEADERS]);
  const tail = grpcTrailers(streamId, 0);
  const frames = Math.ceil(data.length / frameSize);
  const out = new Uint8Array(head.length + frames * 9 + data.length + tail.length);
  out.set(head, 0);
  let at = head.length;
  for (let pos = 0; pos < data.length; pos += frameSize) {
    const f = frame(T.DATA, 0, streamId, data.subarray(pos, pos + frameSize));
    out.set(f, at);
    at += f.length;
  }
  out.set(tail, at);
  return out;
}

async function serve(frameSize: number, mib: number): Promise<void> {
  const lifetime = setTimeout(() => Deno.exit(0), 120_000);
  let done!: () => void;
  const finished = new Promise<void>((resolve) => done = resolve);
  const server = await startRawPeer(async (peer) => {
    await peer.handshake();
    for (;;) {
      const req = await peer.readRequest();
      if (req === undefined) break;
      const big = req.body.length > 5 && req.body[5] === 1;
      const bytes = big
        ? answerBytes(req.streamId, mib, frameSize)
        : answerBytes(req.streamId, 0, 16_384);
      for (let pos = 0; pos < bytes.length; pos += 64 * 1024) {
        if (!await peer.send(bytes.subarray(pos, pos + 64 * 1024))) break;
      }
    }
    done();
  });
  console.log(JSON.stringify({ address: server.address }));
  await finished;
  await server.close();
  clearTimeout(lifetime);
}

function procStatusKiB(field: string): number {
  const text = Deno.readTextFileSync("/proc/self/status");
  const m = text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  return m ? Number(m[1]) : NaN;
}

declare const gc: (() => void) | undefined;

async function client(address: string, timeoutMs: number): Promise<void> {
  const http = await startHttpServer({
    address: "127.0.0.1:0",
    metricsPath: "/metrics",
    log: nullLogger,
  });
  const channel = new GrpcChannel(address, { backoffMs: 100 });
  await channel.unary(PATH, Uint8Array.of(0), 10_000);
  console.log(JSON.stringify({ port: http.port }));
  // Let the parent start polling.
  await new Promise((r) => setTimeout(r, 300));
  gc?.();
  gc?.();
  const rssBefore = procStatusKiB("VmRSS");
  const heapBefore = Deno.memoryUsage().heapUsed;
  Deno.writeTextFileSync("/proc/self/clear_refs", "5");
  let heapPeak = heapBefore;
  let worstLateMs = 0;
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    worstLateMs = Math.max(worstLateMs, now - last - 10);
    last = now;
    heapPeak = Math.max(heapPeak, Deno.memoryUsage().heapUsed);
  }, 10);
  const started = performance.now();
  let outcome = "OK";
  let bytes = 0;
  try {
    bytes = (await channel.unary(PATH, Uint8Array.of(1), timeoutMs)).length;
  } catch (err) {
    outcome = err instanceof GrpcStatusError ? `${err.code} ${err.details}` : String(err);
  }
  const ms = performance.now() - started;
  clearInterval(tick);
  const hwm = procStatusKiB("VmHWM");
  channel.close();
  await http.close();
  console.log(JSON.stringify({
    outcome,
    bytes,
    ms: Math.round(ms),
    rssGrowthMiB: +((hwm - rssBefore) / 1024).toFixed(1),
    heapPeakGrowthMiB: +((heapPeak - heapBefore) / 2 ** 20).toFixed(1),
    worstTimerLateMs: Math.round(worstLateMs),
  }));
}

async function readLine(reader: ReadableStreamDefaultReader<string>): Promise<string> {
  let text = "";
  for (;;) {
    const nl = text.indexOf("\n");
    if (nl >= 0) return text.slice(0, nl);
    const { value, done } = await reader.read();
    if (done) throw new Error(`process ended before a line: ${text}`);
    text += value;
  }
}

function spawn(
  args: string[],
): { child: Deno.ChildProcess; lines: ReadableStreamDefaultReader<string> } {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", SELF, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(
    new TransformStream<string, string>({
      transform(chunk, c) {
        for (const line of chunk.split(/(?<=\n)/)) c.enqueue(line);
      },
    }),
  ).getReader();
  return { child, lines };
}

/** What {@link measure} found. */
export interface FrameSizeResult {
  frameSize: number;
  mib: number;
  /** "OK", or the call's gRPC code and details. */
  outcome: string;
  /** Octets of the message received. */
  bytes: number;
  /** The call's time. */
  ms: number;
  /** Peak RSS of the client during the call over its RSS before. */
  rssGrowthMiB: number;
  heapPeakGrowthMiB: number;
  /** How late a 10 ms interval timer of the client ran at worst during the call. */
  worstTimerLateMs: number;
  healthPolls: number;
  /** The slowest `/healthz` answer of the client. */
  worstHealthMs: number;
}

/**
 * One answer of `mib` MiB in DATA frames of `frameSize` octets, from a server process to a client
 * process (see the module documentation).
 */
export async function measure(
  frameSize: number,
  mib: number,
  timeoutMs: number,
): Promise<FrameSizeResult> {
  const server = spawn(["--serve", `--frame=${frameSize}`, `--mib=${mib}`]);
  const { address } = JSON.parse(await readLine(server.lines));
  const cl = spawn(["--client", `--address=${address}`, `--timeout=${timeoutMs}`]);
  const { port } = JSON.parse(await readLine(cl.lines));
  const resultLine = readLine(cl.lines);
  let worstHealthMs = 0;
  let polls = 0;
  let stop = false;
  resultLine.finally(() => stop = true);
  while (!stop) {
    const t = performance.now();
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      await res.text();
      worstHealthMs = Math.max(worstHealthMs, performance.now() - t);
      polls++;
    } catch {
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const result = JSON.parse(await resultLine);
  await cl.child.status;
  await server.child.status;
  return {
    frameSize,
    mib,
    ...result,
    healthPolls: polls,
    worstHealthMs: Math.round(worstHealthMs),
  };
}

if (import.meta.main) {
  const args: Record<string, string> = {};
  for (const arg of Deno.args) {
    const m = arg.match(/^--([a-z]+)(?:=(.*))?$/);
    if (m === null) throw new Error(`unknown argument ${arg}`);
    args[m[1]!] = m[2] ?? "true";
  }
  const mib = Number(args.mib ?? 3);
  const timeoutMs = Number(args.timeout ?? 60_000);
  if (args.serve) {
    await serve(Number(args.frame), mib);
  } else if (args.client) {
    await client(args.address!, timeoutMs);
  } else {
    for (const size of (args.sizes ?? "16384,64,8,1").split(",")) {
      console.log(JSON.stringify(await measure(Number(size), mib, timeoutMs)));
    }
  }
}
