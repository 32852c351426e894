/**
 * TLS through `node:tls`, for what `Deno.connectTls` / `Deno.startTls` cannot say (see
 * `./dial.ts`): a certificate checked against `tls-server-name` instead of the host, no check at
 * all (`insecure-skip-tls-verify`, as Go's `tls.Config.InsecureSkipVerify`), and TLS inside a
 * proxy's tunnel with a client certificate. `./dial.ts` imports this module dynamically, only for
 * such a connection: `node:net` and `node:tls` cost megabytes once loaded.
 *
 * The sockets are wrapped as a {@link ByteStream}, so the HTTP/1.1 transport reads, writes, pools
 * and watches them exactly as it does a `Deno.Conn`.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import net from "node:net";
import tls from "node:tls";
import type { ByteStream } from "./connection.ts";
import type { TlsSettings } from "./tls_settings.ts";
import { TransportError } from "./errors.ts";
import { errorText } from "../../errors.ts";

/** A `node:net` or `node:tls` socket read one chunk at a time, paused between reads. */
class NodeStream implements ByteStream {
  readonly socket: net.Socket;
  #chunks: Uint8Array[] = [];
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  readonly #onData = (chunk: Buffer) => {
    this.#chunks.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.socket.pause();
    this.#notify();
  };
  readonly #onEnd = () => {
    this.#ended = true;
    this.#notify();
  };
  readonly #onError = (err: Error) => {
    this.#error = err;
    this.#notify();
  };

  constructor(socket: net.Socket) {
    this.socket = socket;
    socket.pause();
    socket.on("data", this.#onData);
    socket.on("end", this.#onEnd);
    socket.on("close", this.#onEnd);
    socket.on("error", this.#onError);
  }

  async read(p: Uint8Array): Promise<number | null> {
    for (;;) {
      const chunk = this.#chunks[0];
      if (chunk !== undefined) {
        const n = Math.min(p.length, chunk.length);
        p.set(chunk.subarray(0, n));
        if (n === chunk.length) this.#chunks.shift();
        else this.#chunks[0] = chunk.subarray(n);
        return n;
      }
      if (this.#error !== undefined) throw this.#error;
      if (this.#ended) return null;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        this.socket.resume();
      });
    }
  }

  write(p: Uint8Array): Promise<number> {
    if (this.#error !== undefined) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.socket.write(p, (err) => err ? reject(err) : resolve(p.length));
    });
  }

  close(): void {
    this.socket.destroy();
    this.#ended = true;
    this.#notify();
  }

  ref(): void {
    this.socket.ref();
  }

  unref(): void {
    this.socket.unref();
  }

  /** The socket without this wrapper's listeners, for TLS to take over; nothing may be unread. */
  release(): net.Socket {
    this.socket.off("data", this.#onData);
    this.socket.off("end", this.#onEnd);
    this.socket.off("close", this.#onEnd);
    this.socket.off("error", this.#onError);
    return this.socket;
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/** The socket's first event of `ok` or `error`. */
function settled(socket: net.Socket, ok: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      socket.off(ok, done);
      socket.off("error", done);
      if (err === undefined) resolve();
      else reject(err);
    };
    socket.once(ok, () => done());
    socket.once("error", done);
  });
}

/** TCP and TLS through `node:net` and `node:tls`, for `./dial.ts`. */
export const nodeNet = {
  /** A TCP connection; TLS may start on it later. */
  async connect(hostname: string, port: number): Promise<ByteStream> {
    const socket = net.connect({ host: hostname, port });
    try {
      await settled(socket, "connect");
    } catch (err) {
      socket.destroy();
      throw err;
    }
    return new NodeStream(socket);
  },

  /**
   * TLS on `stream` (made by {@link nodeNet.connect}), the certificate checked against `name`
   * unless `settings.insecure`; ALPN `http/1.1`.
   *
   * @throws {TransportError} `tls` when the handshake fails.
   */
  async startTls(stream: ByteStream, name: string, settings: TlsSettings): Promise<ByteStream> {
    if (!(stream instanceof NodeStream)) throw new TypeError("not a node:net stream");
    const socket = tls.connect({
      socket: stream.release(),
      // The certificate is checked against `host` (`servername` when set); SNI carries no IP
      // address (RFC 6066 section 3).
      host: name,
      ...(net.isIP(name) === 0 && { servername: name }),
      rejectUnauthorized: !settings.insecure,
      ALPNProtocols: ["http/1.1"],
      ...(settings.caCerts !== undefined && { ca: settings.caCerts }),
      ...(settings.cert !== undefined && { cert: settings.cert, key: settings.key }),
    });
    try {
      await settled(socket, "secureConnect");
    } catch (err) {
      socket.destroy();
      throw new TransportError("tls", errorText(err), { cause: err });
    }
    return new NodeStream(socket);
  },
};
