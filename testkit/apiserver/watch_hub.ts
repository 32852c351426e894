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

/** One open stream. */
class Watcher {
  readonly request: WatchRequest;
  readonly #controller: ReadableStreamDefaultController<Uint8Array>;
  readonly #onClose: (w: Watcher) => void;
  readonly #timers: Timer[] = [];
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

  send(line: WatchLine): void {
    if (this.#closed) return;
    this.#controller.enqueue(encoder.encode(JSON.stringify(line) + "\n"));
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
    let initial: WatchLine[] = [];
    let expired: StatusError | undefined;
    const fromNow = rv === "" || rv === "0";
    if (
      request.sendInitialEvents === true || (request.sendInitialEvents === undefined && fromNow)
    ) {
      const list = this.#registry.list(
        request.resource,
        request.namespace === "" ? undefined : request.namespace,
      );
      initial = list.items.map((object) => ({ type: "ADDED", object }));
      if (request.sendInitialEvents === true && request.allowBookmarks) {
        initial.push(this.#bookmarkLine(request.resource, true));
      }
    } else if (!fromNow) {
      try {
        initial = this.#registry.eventsAfter(Number(rv), (ev) => wantsEvent(request, ev))
          .map((ev) => ({ type: ev.type, object: ev.object }));
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
        for (const line of initial) w.send(line);
        if (request.timeoutSeconds !== undefined && request.timeoutSeconds > 0) {
          w.addTimer(this.#clock.setTimer(request.timeoutSeconds * 1000, () => w.close()));
        }
        if (request.allowBookmarks && this.#bookmarkIntervalMs > 0) this.#scheduleBookmark(w);
      },
      cancel: () => watcher?.cancelled(),
    });
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

  #bookmarkLine(res: ServedResource, initialEventsEnd = false): WatchLine {
    const metadata: BookmarkObject["metadata"] = {
      resourceVersion: String(this.#registry.resourceVersion),
    };
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

/** True when a watch of `request` wants `ev`. */
function wantsEvent(request: WatchRequest, ev: RegistryEvent): boolean {
  if (ev.resource !== request.resource) return false;
  return request.namespace === "" || ev.object.metadata.namespace === request.namespace;
}
