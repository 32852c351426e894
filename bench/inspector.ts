/**
 * A small client of the V8 inspector (Chrome DevTools Protocol) of a `deno run
 * --inspect=127.0.0.1:<port>` process: the heap figures the benchmark reads from our attacher.
 *
 * Methods used (https://chromedevtools.github.io/devtools-protocol/v8/): `Runtime.getHeapUsage`
 * (`usedSize`, `totalSize` of the V8 heap), `HeapProfiler.collectGarbage` (a full mark-compact)
 * and `HeapProfiler.takeHeapSnapshot`, whose JSON arrives in `HeapProfiler.addHeapSnapshotChunk`
 * events before the call answers.
 *
 * @module
 */

/** A free TCP port on 127.0.0.1. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** How long one inspector call may take (a snapshot of a large heap takes seconds). */
const CALL_TIMEOUT_MS = 120_000;

/** One WebSocket session with a process's inspector. Close it with {@link Inspector.close}. */
export class Inspector {
  readonly #ws: WebSocket;
  #nextId = 1;
  readonly #pending = new Map<
    number,
    { resolve: (r: Record<string, unknown>) => void; reject: (e: Error) => void }
  >();
  #chunks: string[] | undefined;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.onmessage = (ev) => {
      const msg = JSON.parse(String(ev.data)) as {
        id?: number;
        method?: string;
        params?: { chunk?: string };
        result?: Record<string, unknown>;
        error?: { message?: string };
      };
      if (msg.method === "HeapProfiler.addHeapSnapshotChunk") {
        this.#chunks?.push(msg.params?.chunk ?? "");
        return;
      }
      if (msg.id === undefined) return;
      const waiter = this.#pending.get(msg.id);
      if (waiter === undefined) return;
      this.#pending.delete(msg.id);
      if (msg.error !== undefined) waiter.reject(new Error(msg.error.message ?? "inspector error"));
      else waiter.resolve(msg.result ?? {});
    };
  }

  /**
   * Connects to the first target of the inspector on `127.0.0.1:port`, retrying while the
   * process starts (up to `waitMs`).
   *
   * @throws {Error} when no target answers in time.
   */
  static async connect(port: number, waitMs = 10_000): Promise<Inspector> {
    const deadline = Date.now() + waitMs;
    let url: string | undefined;
    while (url === undefined) {
      try {
        const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
          webSocketDebuggerUrl?: string;
        }[];
        url = targets[0]?.webSocketDebuggerUrl;
      } catch (err) {
        if (Date.now() >= deadline) {
          throw new Error(`no inspector on port ${port}: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("cannot connect to the inspector"));
    });
    return new Inspector(ws);
  }

  /** Sends one method and resolves with its result. */
  call(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${method}: no answer in ${CALL_TIMEOUT_MS} ms`));
      }, CALL_TIMEOUT_MS);
      this.#pending.set(id, {
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** `usedSize` and `totalSize` of the V8 heap, bytes. */
  async heapUsage(): Promise<{ usedBytes: number; totalBytes: number }> {
    const r = await this.call("Runtime.getHeapUsage");
    return { usedBytes: Number(r.usedSize), totalBytes: Number(r.totalSize) };
  }

  /** Two full garbage collections (the second frees what the first's finalizers released). */
  async collectGarbage(): Promise<void> {
    await this.call("HeapProfiler.collectGarbage");
    await this.call("HeapProfiler.collectGarbage");
  }

  /** A heap snapshot's JSON text (V8 collects garbage first). */
  async heapSnapshot(): Promise<string> {
    this.#chunks = [];
    try {
      await this.call("HeapProfiler.takeHeapSnapshot", { reportProgress: false });
      return this.#chunks.join("");
    } finally {
      this.#chunks = undefined;
    }
  }

  /** Ends the session. */
  close(): void {
    this.#ws.close();
  }
}
