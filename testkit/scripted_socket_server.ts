/**
 * A unix-socket server that hands each accepted connection to a test's script: the shared part
 * of the test kit's raw HTTP/2 servers (`h2/raw_peer.ts`, `csi/raw_h2_server.ts`), which differ
 * only in the connection wrapper they give the script.
 *
 * @module
 */

/** A running server. */
export interface ScriptedSocketServer {
  /** The unix socket path. */
  readonly address: string;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Stops listening, closes every connection, waits for the scripts, removes the socket. */
  close(): Promise<void>;
}

/**
 * Listens on a unix socket in a new temp dir (`prefix` names it) and runs `script` on each
 * connection, wrapped by `wrap`, with its index from 0. A connection is closed when its script
 * returns; a script's error is kept and rethrown by {@link ScriptedSocketServer.close}.
 */
export async function startScriptedSocketServer<C extends { close(): void }>(
  prefix: string,
  wrap: (conn: Deno.Conn) => C,
  script: (conn: C, index: number) => Promise<void>,
): Promise<ScriptedSocketServer> {
  const dir = await Deno.makeTempDir({ prefix });
  const path = `${dir}/h2.sock`;
  const listener = Deno.listen({ transport: "unix", path });
  const conns: C[] = [];
  const scripts: Promise<void>[] = [];
  const errors: unknown[] = [];
  const accepting = (async () => {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return;
      }
      const wrapped = wrap(conn);
      conns.push(wrapped);
      scripts.push(
        script(wrapped, conns.length - 1).catch((err) => {
          errors.push(err);
        }).finally(() => wrapped.close()),
      );
    }
  })();
  return {
    address: path,
    get connections() {
      return conns.length;
    },
    async close() {
      listener.close();
      await accepting;
      for (const c of conns) c.close();
      await Promise.all(scripts);
      await Deno.remove(dir, { recursive: true });
      if (errors.length > 0) throw errors[0];
    },
  };
}
