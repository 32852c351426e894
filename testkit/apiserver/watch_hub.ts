/**
 * The open watch streams of {@link import("./server.ts").MemoryApiServer}: each one a
 * newline-delimited JSON body of `{"type": ..., "object": ...}` events, as kube-apiserver streams
 * them over HTTP/1.1.
 *
 * @module
 */

import type { Clock, Timer } from "../../lib/clock.ts";
import type { Status } from "../../lib/kube/types.ts";
import type { Registry, RegistryEvent, StoredObject } from "./registry.ts";
import { apiVersionOf, type ServedResource } from "./resources.ts";
import {
  invalidWatchResourceVersion,
  resourceVersionParseError,
  StatusError,
} from "./status_errors.ts";

/** What a watch asks for. */
export interface WatchRequest {
  resource: ServedResource;
  /** "" watches every namespace. */
  namespace: string;
  /**
   * Without `sendInitialEvents`: "" or "0" sends the current objects as ADDED events first, a
   * number every event after it.
   */
  resourceVersion: string;
  /**
   * true: the current objects as ADDED events first, then (with bookmarks allowed) a BOOKMARK
   * annotated `k8s.io/initial-events-end: "true"`; false: from resourceVersion "" or "0" only
   * the changes from now on, from a number every event after it; undefined: as `resourceVersion`
   * says.
   */
  sendInitialEvents?: boolean;
  allowBookmarks: boolean;
  /** The server closes the stream after this many seconds; undefined: never. */
  timeoutSeconds?: number;
  /**
   * The bytes of one event in the negotiated stream form (protobuf frames); undefined: a line of
   * JSON.
   */
  encodeLine?: (line: WatchLine) => Uint8Array;
}

/**
 * The object of a BOOKMARK event: an empty object of the watched kind (as the real server
 * serializes one) carrying the resourceVersion reached.
 */
export interface BookmarkObject {
  kind: string;
  apiVersion: string;
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** The annotation of the BOOKMARK that ends the initial events of a watch list. */
export const INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end";

/** One line of a watch stream. */
export type WatchLine =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; object: StoredObject }
  | { type: "BOOKMARK"; object: BookmarkObject }
  | { type: "ERROR"; object: Status };

const encoder = new TextEncoder();

/**
 * Bytes of initial events (a watch list's, or a watch from resourceVersion "0") serialized per
 * read of the response body. kube-apiserver's watch handler (`staging/src/k8s.io/apiserver/pkg/
 * endpoints/handlers/watch.go`, `serveWatch`) writes event by event and flushes when its queue
 * is empty, so a slow reader holds the server back through the connection; here the body is
 * pulled a chunk at a time, and the time the end bookmark is written says when the client has
 * read the list (up to the socket buffers), not when the server had queued it.
 */
export const INITIAL_CHUNK_BYTES = 64 * 1024;

/** One open stream. */
class Watcher {
  readonly request: WatchRequest;
  readonly #controller: ReadableStreamDefaultController<Uint8Array>;
  readonly #onClose: (w: Watcher) => void;
  readonly #timers: Timer[] = [];
  /** The initial events not yet serialized; undefined once they all were. */
  #initial: Iterator<WatchLine> | undefined;
  /** Events that arrived while initial ones were still pending, in order. */
  #held: WatchLine[] = [];
  #initialDone: (() => void) | undefined;
  #closed = false;

  constructor(
    controller: ReadableStreamDefaultController<Uint8Array>,
    request: WatchRequest,
    onClose: (w: Watcher) => void,
  ) {
    this.#controller = controller;
    this.request = request;
    this.#onClose = onClose;
  }

  get closed(): boolean {
    return this.#closed;
  }

  addTimer(t: Timer): void {
    this.#timers.push(t);
  }

  /** Lines sent before any other, a chunk per {@link pull}; `done` once the last is written. */
  setInitial(lines: Iterator<WatchLine>, done: () => void): void {
    this.#initial = lines;
    this.#initialDone = done;
  }

  send(line: WatchLine): void {
    if (this.#closed) return;
    if (this.#initial !== undefined) {
      this.#held.push(line);
      return;
    }
    const encode = this.request.encodeLine;
    this.#controller.enqueue(
      encode === undefined ? encoder.encode(JSON.stringify(line) + "\n") : encode(line),
    );
  }

  /** The reader wants more: the next {@link INITIAL_CHUNK_BYTES} of initial events. */
  pull(): void {
    const initial = this.#initial;
    if (initial === undefined || this.#closed) return;
    const encode = this.request.encodeLine;
    let text = "";
    const parts: Uint8Array[] = [];
    let size = 0;
    while (text.length + size < INITIAL_CHUNK_BYTES) {
      const next = initial.next();
      if (next.done) {
        this.#initial = undefined;
        break;
      }
      if (encode === undefined) {
        text += JSON.stringify(next.value) + "\n";
      } else {
        const part = encode(next.value);
        parts.push(part);
        size += part.length;
      }
    }
    if (text !== "") this.#controller.enqueue(encoder.encode(text));
    if (size > 0) {
      const chunk = new Uint8Array(size);
      let at = 0;
      for (const part of parts) {
        chunk.set(part, at);
        at += part.length;
      }
      this.#controller.enqueue(chunk);
    }
    if (this.#initial === undefined) {
      this.#initialDone?.();
      for (const line of this.#held.splice(0)) this.send(line);
    }
  }

  /** Ends the response body normally (the client sees the end of the stream). */
  close(): void {
    if (this.#closed) return;
    this.#controller.close();
    this.#stop();
  }

  /** The client went away: only forget the stream. */
  cancelled(): void {
    if (this.#closed) return;
    this.#stop();
  }

  #stop(): void {
    this.#closed = true;
    this.#initial = undefined;
    this.#held = [];
    for (const t of this.#timers) t.cancel();
    this.#onClose(this);
  }
}

/** The open watches: fans registry changes out to them, sends bookmarks, closes them. */
export class WatchHub {
  readonly #registry: Registry;
  readonly #clock: Clock;
  readonly #bookmarkIntervalMs: number;
  readonly #watchers = new Set<Watcher>();
  readonly #listEndListeners = new Set<(request: WatchRequest) => void>();
  #unsubscribe: (() => void) | undefined;

  constructor(
    deps: { registry: Registry; clock: Clock },
    options: { bookmarkIntervalMs: number },
  ) {
    this.#registry = deps.registry;
    this.#clock = deps.clock;
    this.#bookmarkIntervalMs = options.bookmarkIntervalMs;
  }

  /** Number of open watch streams. */
  get size(): number {
    return this.#watchers.size;
  }

  /**
   * Opens a watch and returns its response body. A resourceVersion older than the history gives
   * a stream with one ERROR event (410 Expired) that then ends, as the watch cache does.
   *
   * @throws {StatusError} 500 for a resourceVersion that is not a number (as the real server).
   */
  open(request: WatchRequest): ReadableStream<Uint8Array> {
    const rv = request.resourceVersion;
    const parseError = rv === "" ? undefined : resourceVersionParseError(rv);
    if (parseError !== undefined) throw invalidWatchResourceVersion(parseError);
    this.#unsubscribe ??= this.#registry.subscribe((ev) => this.#dispatch(ev));
    let initial: Iterator<WatchLine> | undefined;
    let expired: StatusError | undefined;
    const fromNow = rv === "" || rv === "0";
    if (
      request.sendInitialEvents === true || (request.sendInitialEvents === undefined && fromNow)
    ) {
      const list = this.#registry.snapshot(
        request.resource,
        request.namespace === "" ? undefined : request.namespace,
      );
      // The end bookmark carries the snapshot's resourceVersion, not a later one: events after
      // it follow the bookmark.
      const end = request.sendInitialEvents === true && request.allowBookmarks
        ? this.#bookmarkLine(request.resource, true, list.resourceVersion)
        : undefined;
      initial = initialLines(list.items, end);
    } else if (!fromNow) {
      try {
        initial = this.#registry.eventsAfter(Number(rv), (ev) => wantsEvent(request, ev))
          .map((ev): WatchLine => ({ type: ev.type, object: ev.object })).values();
      } catch (err) {
        if (!(err instanceof StatusError)) throw err;
        expired = err;
      }
    }
    let watcher: Watcher | undefined;
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        const w = new Watcher(controller, request, (done) => this.#watchers.delete(done));
        watcher = w;
        this.#watchers.add(w);
        if (expired !== undefined) {
          w.send({ type: "ERROR", object: expired.status });
          w.close();
          return;
        }
        if (initial !== undefined) {
          w.setInitial(initial, () => {
            if (request.sendInitialEvents !== true) return;
            for (const fn of this.#listEndListeners) fn(request);
          });
        }
        if (request.timeoutSeconds !== undefined && request.timeoutSeconds > 0) {
          w.addTimer(this.#clock.setTimer(request.timeoutSeconds * 1000, () => w.close()));
        }
        if (request.allowBookmarks && this.#bookmarkIntervalMs > 0) this.#scheduleBookmark(w);
      },
      pull: () => watcher?.pull(),
      cancel: () => watcher?.cancelled(),
    });
  }

  /**
   * Calls `fn` each time a watch list (`sendInitialEvents=true`) has written its last initial
   * event to the response body: the moment its client has read the list, give or take the
   * socket buffers. Returns the unsubscribe function.
   */
  onWatchListSent(fn: (request: WatchRequest) => void): () => void {
    this.#listEndListeners.add(fn);
    return () => this.#listEndListeners.delete(fn);
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that allows bookmarks. */
  bookmark(): void {
    for (const w of [...this.#watchers]) {
      if (w.request.allowBookmarks) w.send(this.#bookmarkLine(w.request.resource));
    }
  }

  /** Ends every open watch stream normally. */
  closeAll(): void {
    for (const w of [...this.#watchers]) w.close();
  }

  /** Ends every stream and stops listening to the registry. */
  dispose(): void {
    this.closeAll();
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  #scheduleBookmark(w: Watcher): void {
    w.addTimer(this.#clock.setTimer(this.#bookmarkIntervalMs, () => {
      if (w.closed) return;
      w.send(this.#bookmarkLine(w.request.resource));
      this.#scheduleBookmark(w);
    }));
  }

  #bookmarkLine(
    res: ServedResource,
    initialEventsEnd = false,
    resourceVersion = this.#registry.resourceVersion,
  ): WatchLine {
    const metadata: BookmarkObject["metadata"] = { resourceVersion: String(resourceVersion) };
    if (initialEventsEnd) metadata.annotations = { [INITIAL_EVENTS_END_ANNOTATION]: "true" };
    return {
      type: "BOOKMARK",
      object: {
        kind: res.kind,
        apiVersion: apiVersionOf(res),
        metadata,
        ...structuredClone(res.emptyObject),
      },
    };
  }

  #dispatch(ev: RegistryEvent): void {
    for (const w of [...this.#watchers]) {
      if (wantsEvent(w.request, ev)) w.send({ type: ev.type, object: ev.object });
    }
  }
}

/** The ADDED events of `items`, then `end` when given, one at a time. */
function* initialLines(
  items: readonly StoredObject[],
  end: WatchLine | undefined,
): Generator<WatchLine> {
  for (const object of items) yield { type: "ADDED", object };
  if (end !== undefined) yield end;
}

/** True when a watch of `request` wants `ev`. */
function wantsEvent(request: WatchRequest, ev: RegistryEvent): boolean {
  if (ev.resource !== request.resource) return false;
  return request.namespace === "" || ev.object.metadata.namespace === request.namespace;
}
