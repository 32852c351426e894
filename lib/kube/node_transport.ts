/**
 * The `node:https` transport, for what `Deno.createHttpClient` cannot do: a cluster with
 * `insecure-skip-tls-verify` or `tls-server-name`, or one behind a `proxy-url` (client-node's
 * agent). `./transport.ts` imports this module dynamically, only for such a connection.
 *
 * Node's failures are mapped here, once, to the kinds of {@link TransportError} by their `code`
 * (`ECONNRESET`, `ECONNREFUSED`, a certificate code, an `HPE_` parser code).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import http from "node:http";
import https from "node:https";
import type { ClusterConnection } from "./config.ts";
import type { RequestUrl, Transport, TransportRequest, TransportResponse } from "./transport.ts";
import { TransportError, type TransportErrorKind } from "../wire/http1/errors.ts";
import { errorText } from "../errors.ts";

/** Node's codes of a connection that was never made. */
const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "EADDRNOTAVAIL",
]);

/**
 * A `node:http(s)` failure as a {@link TransportError}, by the error's `code`: a refused or
 * unresolved connection is `connect`, a reset or broken pipe `reset` (node's "socket hang up",
 * a connection closed before the answer, carries `ECONNRESET`), a certificate or TLS code `tls`,
 * an HTTP parser code (`HPE_…`) `protocol`. An error without a known code is `protocol`: it is
 * not a broken connection a GET may be retried after.
 */
export function nodeTransportError(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  let kind: TransportErrorKind = "protocol";
  if (code === "ECONNRESET" || code === "EPIPE" || code === "ECONNABORTED") kind = "reset";
  else if (CONNECT_CODES.has(code)) kind = "connect";
  else if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO|ALTNAME/.test(code)) kind = "tls";
  return new TransportError(kind, errorText(err), { cause: err });
}

/** One keep-alive agent; {@link NodeTransport.renew} closes its idle sockets. */
export class NodeTransport implements Transport {
  readonly #agent: http.Agent;
  #generation = 0;
  #closed = false;

  private constructor(agent: http.Agent) {
    this.#agent = agent;
  }

  /** The agent of `connection`: client-node's proxy agent, or one from the TLS material. */
  static async create(server: URL, connection: ClusterConnection): Promise<NodeTransport> {
    if (connection.proxyAgent !== undefined) {
      const agent = await connection.proxyAgent();
      if (!(agent instanceof http.Agent)) throw new TypeError("the proxy agent is no http.Agent");
      return new NodeTransport(agent);
    }
    if (server.protocol !== "https:") return new NodeTransport(new http.Agent({ keepAlive: true }));
    const tls = connection.tls;
    return new NodeTransport(
      new https.Agent({
        keepAlive: true,
        ca: tls.ca && Buffer.from(tls.ca),
        cert: tls.cert && Buffer.from(tls.cert),
        key: tls.key && Buffer.from(tls.key),
        rejectUnauthorized: !tls.insecureSkipTlsVerify,
        servername: tls.serverName,
      }),
    );
  }

  get generation(): number {
    return this.#generation;
  }

  send(url: RequestUrl, request: TransportRequest): Promise<TransportResponse> {
    const { signal } = request;
    if (this.#closed) {
      return Promise.reject(new TransportError("closed", "the transport is closed"));
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of request.headers) {
      const had = headers[name];
      headers[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
    }
    if (request.body !== undefined) {
      headers["Content-Length"] = String(Buffer.byteLength(request.body));
    }
    const mod = url.protocol === "https:" ? https : http;
    const req = mod.request(url.href, { method: request.method, agent: this.#agent, headers });
    return new Promise<TransportResponse>((resolve, reject) => {
      let answered = false;
      let fail: (reason: unknown) => void = reject;
      const onAbort = () => {
        fail(signal.reason);
        req.destroy();
      };
      signal.addEventListener("abort", onAbort, { once: true });
      req.on("error", (err: Error) => {
        if (!answered) signal.removeEventListener("abort", onAbort);
        fail(nodeTransportError(err));
      });
      req.on("response", (response: http.IncomingMessage) => {
        answered = true;
        let done = false;
        let controller!: ReadableStreamDefaultController<Uint8Array>;
        const finish = (err?: unknown) => {
          if (done) return;
          done = true;
          signal.removeEventListener("abort", onAbort);
          if (err === undefined) controller.close();
          else controller.error(err);
        };
        fail = (reason) => {
          finish(reason);
          response.destroy();
        };
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            controller = c;
            response.on("data", (chunk: Buffer) => {
              if (done) return;
              controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
              if ((controller.desiredSize ?? 1) <= 0) response.pause();
            });
            response.on("end", () => finish());
            response.on("error", (err: Error) => finish(nodeTransportError(err)));
            // A connection that closes before the end of the body is an error, not an end.
            response.on("close", () => {
              if (!response.complete) {
                finish(new TransportError("eof", "socket hang up: the body ended early"));
              }
            });
          },
          pull() {
            response.resume();
          },
          cancel() {
            done = true;
            signal.removeEventListener("abort", onAbort);
            response.destroy();
          },
        });
        resolve({
          status: response.statusCode ?? 0,
          headers: { get: (name) => headerText(response.headers[name.toLowerCase()]) ?? null },
          body,
        });
      });
      req.end(request.body);
    });
  }

  renew(generation: number): void {
    if (generation !== this.#generation) return;
    this.#generation++;
    // The idle pooled sockets go; requests under way keep theirs.
    for (const sockets of Object.values(this.#agent.freeSockets)) {
      for (const socket of sockets ?? []) socket.destroy();
    }
  }

  close(): void {
    this.#closed = true;
    this.#agent.destroy();
  }
}

/** A response header as one string (the first value of a repeated one). */
function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
