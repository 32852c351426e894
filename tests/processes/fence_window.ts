/**
 * Measures the fence's residual window: the time between the lease fence's answer and the
 * `Deno.Conn.write` call that carries the request, over many calls of a real HTTP/2 session to a
 * gRPC server (the test kit's CSI driver on a unix socket), and over many PATCH requests of the
 * HTTP/1.1 transport to an HTTP server on loopback TCP (the path of the attacher's API writes).
 * ARCHITECTURE.md ("One leader at a time") quotes its figures.
 *
 * Usage: `deno run -A tests/processes/fence_window.ts [--calls N]` (default 20 000 of each).
 *
 * @module
 */

import { Http2Session } from "../../lib/wire/http2/session.ts";
import { frameMessage, requestHeaders } from "../../lib/wire/grpc/request.ts";
import { FakeCsiDriver } from "../../testkit/csi/fake_driver.ts";
import { Http1Transport } from "../../lib/wire/http1/transport.ts";

/** The window's figures in microseconds. */
export interface WindowFigures {
  calls: number;
  medianUs: number;
  p99Us: number;
  maxUs: number;
  /** Calls whose window exceeded 100 µs and 1 ms (the process descheduled, a GC). */
  over100Us: number;
  over1Ms: number;
}

/** Makes `calls` Probe calls, each with a fence, and measures fence → write. */
export async function measureFenceWindow(calls: number): Promise<WindowFigures> {
  const dir = await Deno.makeTempDir({ prefix: "fence-window-" });
  const driver = await FakeCsiDriver.start({ address: `${dir}/csi.sock` });
  const raw = await Deno.connect({ transport: "unix", path: `${dir}/csi.sock` });
  let checkedAt: number | undefined;
  const gaps: number[] = [];
  const conn = new Proxy(raw, {
    get(target, key) {
      if (key === "write") {
        return (bytes: Uint8Array) => {
          if (checkedAt !== undefined) gaps.push(performance.now() - checkedAt);
          checkedAt = undefined;
          return target.write(bytes);
        };
      }
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const session = await Http2Session.start(conn, () => {});
  const fence = {
    valid: () => {
      checkedAt = performance.now();
      return true;
    },
  };
  try {
    const headers = requestHeaders("/csi.v1.Identity/Probe", "localhost", 5000);
    const body = frameMessage(new Uint8Array(0));
    for (let i = 0; i < calls; i++) {
      await session.request(headers, body, 1 << 20, { fence }).response;
    }
  } finally {
    session.close();
    await driver.close();
    await Deno.remove(dir, { recursive: true });
  }
  return figures(gaps);
}

/**
 * Makes `calls` PATCH requests of the HTTP/1.1 transport, each with a fence, on one keep-alive
 * connection to a local HTTP server, and measures fence → write.
 */
export async function measureHttp1FenceWindow(calls: number): Promise<WindowFigures> {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      await req.arrayBuffer();
      return new Response("{}", { headers: { "content-type": "application/json" } });
    },
  );
  let checkedAt: number | undefined;
  const gaps: number[] = [];
  const transport = new Http1Transport({ insecureSkipTlsVerify: false }, {
    connect: async (hostname, port) => {
      const raw = await Deno.connect({ hostname, port });
      return new Proxy(raw, {
        get(target, key) {
          if (key === "write") {
            return (bytes: Uint8Array) => {
              if (checkedAt !== undefined) gaps.push(performance.now() - checkedAt);
              checkedAt = undefined;
              return target.write(bytes);
            };
          }
          const value = Reflect.get(target, key);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    },
  });
  const fence = {
    valid: () => {
      checkedAt = performance.now();
      return true;
    },
  };
  const url = new URL(
    `http://127.0.0.1:${server.addr.port}/apis/storage.k8s.io/v1/volumeattachments/va1/status`,
  );
  const body = JSON.stringify({ status: { attached: true }, metadata: { uid: "u1" } });
  try {
    for (let i = 0; i < calls; i++) {
      const res = await transport.send(url, {
        method: "PATCH",
        headers: [["Content-Type", "application/merge-patch+json"]],
        body,
        signal: AbortSignal.timeout(5000),
        fence,
      });
      await res.text!();
    }
  } finally {
    transport.close();
    await server.shutdown();
  }
  return figures(gaps);
}

function figures(gaps: number[]): WindowFigures {
  gaps.sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(gaps[Math.min(gaps.length - 1, Math.floor(q * gaps.length))]! * 1000 * 10) / 10;
  return {
    calls: gaps.length,
    medianUs: at(0.5),
    p99Us: at(0.99),
    maxUs: at(1),
    over100Us: gaps.filter((g) => g > 0.1).length,
    over1Ms: gaps.filter((g) => g > 1).length,
  };
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--calls");
  const calls = i >= 0 ? Number(Deno.args[i + 1]) : 20_000;
  const print = (what: string, f: WindowFigures) =>
    console.log(
      `${what}: fence → Deno.Conn.write over ${f.calls} calls: median ${f.medianUs} µs, ` +
        `p99 ${f.p99Us} µs, max ${f.maxUs} µs; over 100 µs ${f.over100Us}, over 1 ms ${f.over1Ms}`,
    );
  print("HTTP/2 (driver calls)", await measureFenceWindow(calls));
  print("HTTP/1.1 (API writes)", await measureHttp1FenceWindow(calls));
}
