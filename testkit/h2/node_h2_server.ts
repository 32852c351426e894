/**
 * A real, independent HTTP/2 server for the HTTP/2 transport's tests: Node's `http2` module
 * (nghttp2) over TLS, in a `node` child process, so that nothing of this repository's HTTP/2 code
 * is on the server's side. With `http1Only` it is a Node `https` server whose ALPN offers
 * `http/1.1` only.
 *
 * Routes: `/text` answers "hello"; `/bytes?n=N` N octets of `x`; `/watch` a line every 20 ms until
 * the client resets the stream; `/stats` JSON `{sessions, streams}` (sessions ever accepted, streams
 * open now); `/goaway` sends GOAWAY on its connection (last stream: this one), then answers "bye"; `/echo` the request's
 * method, `content-type` and body as JSON; `/headers?n=N` a header of N octets.
 *
 * @module
 */

import { makePki, type Pki } from "../pki.ts";

const SCRIPT = String.raw`
const fs = require("node:fs");
const http2 = require("node:http2");
const https = require("node:https");
const [key, cert, mode, maxStreams] = [process.env.KEY, process.env.CERT, process.env.MODE, Number(process.env.MAX_STREAMS)];
let sessions = 0;
let streams = 0;
function route(req, res) {
  const url = new URL(req.url, "https://x");
  streams++;
  res.on("close", () => streams--);
  if (url.pathname === "/text") return res.end("hello");
  if (url.pathname === "/bytes") return res.end("x".repeat(Number(url.searchParams.get("n"))));
  if (url.pathname === "/stats") return res.end(JSON.stringify({ sessions, streams: streams - 1 }));
  if (url.pathname === "/headers") { res.setHeader("x-big", "y".repeat(Number(url.searchParams.get("n")))); return res.end("ok"); }
  if (url.pathname === "/echo") {
    let body = "";
    req.on("data", (d) => body += d);
    req.on("end", () => res.end(JSON.stringify({ method: req.method, type: req.headers["content-type"] ?? null, body, protocol: req.httpVersion })));
    return;
  }
  if (url.pathname === "/goaway") {
    // GOAWAY first: the client has it before the answer (one connection, in order).
    if (req.stream) req.stream.session.goaway(0, req.stream.id);
    return res.end("bye");
  }
  if (url.pathname === "/watch") {
    res.writeHead(200, { "content-type": "application/json" });
    let i = 0;
    const t = setInterval(() => res.write(JSON.stringify({ type: "ADDED", i: i++ }) + "\n"), 20);
    res.on("close", () => clearInterval(t));
    return;
  }
  res.statusCode = 404;
  res.end("not found");
}
const server = mode === "http1"
  ? https.createServer({ key, cert, ALPNProtocols: ["http/1.1"] }, route)
  : http2.createSecureServer({ key, cert, settings: { maxConcurrentStreams: maxStreams } }, route);
server.on("secureConnection", () => sessions++);
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

/** A running Node server; {@link close} stops it. */
export interface NodeH2Server {
  /** `https://localhost:<port>` */
  readonly url: string;
  readonly pki: Pki;
  close(): Promise<void>;
}

/** Starts the server; `maxConcurrentStreams` is its SETTINGS_MAX_CONCURRENT_STREAMS. */
export async function startNodeH2Server(
  options: { http1Only?: boolean; maxConcurrentStreams?: number; pki?: Pki } = {},
): Promise<NodeH2Server> {
  const pki = options.pki ?? await makePki("DNS:localhost,IP:127.0.0.1");
  const child = new Deno.Command("node", {
    args: ["-e", SCRIPT],
    env: {
      KEY: pki.key,
      CERT: pki.cert,
      MODE: options.http1Only ? "http1" : "h2",
      MAX_STREAMS: String(options.maxConcurrentStreams ?? 100),
    },
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the node server exited before listening");
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const port = Number(text.trim());
  const stdin = child.stdin.getWriter();
  return {
    url: `https://localhost:${port}`,
    pki,
    async close() {
      await stdin.close().catch(() => {});
      await child.stdout.cancel().catch(() => {});
      await child.status;
    },
  };
}
