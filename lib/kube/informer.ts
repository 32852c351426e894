/**
 * A shared informer, the way client-go's `tools/cache` shared informer is one: the objects kept
 * in memory, add/update/delete callbacks, the periodic resync and `waitForSync`. Its reflector
 * (`./reflector.ts`) fills it: LIST, then WATCH from the list's resourceVersion, resumed and
 * backed off as client-go's reflector does.
 *
 * We do not use client-node's `ListWatch`/`makeInformer`: it stops for good on any error other
 * than 410, sends no watch timeout and requests no bookmarks (client-node 1.4.0 `src/cache.ts`,
 * `src/watch.ts`; https://github.com/kubernetes-client/javascript/issues/958).
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { type KubeApi, qualifiedResource, type Resource } from "./api.ts";
import type { Logger } from "../observe/logger.ts";
import { nullLogger } from "../observe/logger.ts";
import type { EventHandlers, ObjectStore } from "./store.ts";
import type { KubeObject } from "./types.ts";
import { Reflector } from "./reflector.ts";

export { INITIAL_EVENTS_END_ANNOTATION } from "./reflector.ts";

/** Collaborators of {@link Informer}. */
export interface InformerDeps {
  /** Only `list` and `watch` are called. */
  kube: KubeApi;
  /** Timers for the backoff, the resync and the watch deadline. @default realClock */
  clock?: Clock;
  log?: Logger;
  /** Source of jitter for the backoff and the watch timeout, in [0, 1). @default Math.random */
  random?: () => number;
}

/** Options of {@link Informer}. */
export interface InformerOptions<T> {
  /** What to list and watch (all namespaces when namespaced). */
  resource: Resource;
  /**
   * Every `resyncMs` each cached object is delivered again as `update(obj, obj)`; 0 disables it.
   * The first resync comes `resyncMs` after the first successful list.
   */
  resyncMs: number;
  /** Name in log lines. @default qualifiedResource(resource), e.g. `volumeattachments.storage.k8s.io` */
  name?: string;
  /**
   * Each watch asks the server to close it after a random `timeoutSeconds` in
   * [minWatchTimeout, 2 × minWatchTimeout), as client-go's reflector does. @default 300000
   */
  minWatchTimeoutMs?: number;
  /**
   * Liveness: a watch that delivers neither an event nor a bookmark for this long is closed and
   * resumed from the last resourceVersion on a new connection (the API client also drops its
   * idle pooled connections). client-go notices a silent connection in about 45 s (HTTP/2 read
   * idle 30 s + ping 15 s, kubernetes#95981); HTTP/1.1 has no ping, so a quiet but healthy watch
   * (the server sends a bookmark about once a minute) is also renewed at this pace, at the cost
   * of one watch request. 0 disables it. @default 30000
   */
  watchIdleTimeoutMs?: number;
  /**
   * Start with a streaming watch list (`sendInitialEvents=true`, ended by the
   * `k8s.io/initial-events-end` bookmark), as client-go's reflector does with its WatchListClient
   * feature, instead of a LIST: the API server then streams the objects from its watch cache
   * instead of a large consistent read. When the watch list fails or ends before that bookmark
   * (a server that does not serve watch lists), the informer falls back to a paginated LIST for
   * that attempt. @default false
   */
  watchList?: boolean;
  /**
   * Page size of a LIST (`limit`; client-go's pager: 500); pages continue until the server's
   * last, with no cap on their number. A `continue` token that expired (410) restarts the list
   * in one unpaginated answer, as client-go's pager does. 0 lists in one answer. @default 500
   */
  pageSize?: number;
  /**
   * Applied to every object entering the cache, after `metadata.managedFields` has been removed.
   * It receives a shallow copy (its own `metadata` object) and may change it.
   */
  transform?: (obj: T) => T;
  /**
   * Called once for each object of a list page or of a watch list's initial events, after its
   * transform and before the cache is replaced: where a caller collects the garbage of reading a
   * large list while it is read (the attacher's `lib/heap.ts`, `pacedCollector`).
   */
  onListedObject?: () => void;
}

const DEFAULT_MIN_WATCH_TIMEOUT_MS = 300_000;
const DEFAULT_WATCH_IDLE_TIMEOUT_MS = 30_000;
const DEFAULT_PAGE_SIZE = 500;

/**
 * The cache key of `obj`: `name` for cluster-scoped objects, `namespace/name` for namespaced ones
 * (client-go's `MetaNamespaceKeyFunc`), or undefined when the object has no name.
 */
function keyOf(obj: KubeObject): string | undefined {
  const meta = obj?.metadata;
  if (typeof meta?.name !== "string" || meta.name === "") return undefined;
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/**
 * Lists and watches one resource, keeps every object in memory and delivers add/update/delete
 * callbacks, like client-go's reflector + shared informer.
 *
 * Guarantees:
 * - **It never stops on its own.** A failed list or watch is logged and retried after a backoff
 *   (800ms doubling to 30s, with jitter, reset after 2 quiet minutes); only the signal given to
 *   {@link Informer.run} ends it.
 * - **Watches resume.** A watch the server closes (its `timeoutSeconds`, random in 5–10 minutes by
 *   default, elapsed) or that fails is started again from the last resourceVersion seen, from an
 *   object or a BOOKMARK, without a list. Only 410 Gone (an `ERROR` event or a rejected request)
 *   leads to a new list, after a backoff as in client-go (so a server that keeps answering 410
 *   is not hammered).
 * - **A list replaces the cache** and delivers `update(old, new)` for every object that was cached
 *   before (even unchanged), `add` for new ones, then `delete(lastKnown)` for those gone, as
 *   client-go's `Replace` does.
 * - **Watch events:** ADDED and MODIFIED deliver `update(cached, new)` when the object is cached,
 *   else `add`; DELETED delivers `delete` with the event's object (the final state) and is ignored
 *   for an object not in the cache. An update whose resourceVersion did not change (a duplicate) is
 *   still delivered.
 * - **Cache before callbacks:** when a callback runs, {@link Informer.get} already returns the new
 *   state. Callbacks run synchronously, in the order the handlers were added; one that throws is
 *   logged and the others still run.
 * - Every cached object has had `metadata.managedFields` removed (and then the optional
 *   `transform` applied). The objects are shared: callers MUST NOT modify them.
 *
 * Keys are `metadata.name` for cluster-scoped objects (VolumeAttachments, PersistentVolumes and
 * CSINodes, all the attacher caches) and `namespace/name` for namespaced ones.
 *
 * @example
 * ```ts
 * import { type KubeApi, VOLUME_ATTACHMENTS } from "./api.ts";
 * import type { VolumeAttachment } from "./types.ts";
 * declare const kube: KubeApi, signal: AbortSignal, queue: { add(key: string): void };
 *
 * const vas = new Informer<VolumeAttachment>({ kube }, {
 *   resource: VOLUME_ATTACHMENTS,
 *   resyncMs: 600_000,
 * });
 * vas.addHandlers({ add: (va) => queue.add(va.metadata.name) });
 * const done = vas.run(signal);
 * await vas.waitForSync(signal);
 * ```
 */
export class Informer<T extends KubeObject> implements ObjectStore<T> {
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #resyncMs: number;
  readonly #userTransform: ((obj: T) => T) | undefined;
  /** The list/watch loop that fills the cache (`./reflector.ts`). */
  readonly #reflector: Reflector<T>;

  /** The cache. Invariant: every value has been through {@link Informer.#transform}. */
  #items = new Map<string, T>();
  #handlers: EventHandlers<T>[] = [];
  #synced = false;
  #syncWaiters: Array<() => void> = [];
  #started = false;
  #resyncTimer: Timer | undefined;

  /**
   * @throws {RangeError} when `resyncMs` is negative or not finite, or `minWatchTimeoutMs` is
   *   below one second.
   */
  constructor(deps: InformerDeps, opts: InformerOptions<T>) {
    if (!Number.isFinite(opts.resyncMs) || opts.resyncMs < 0) {
      throw new RangeError(
        `Cannot create informer as 'resyncMs' must be zero or positive: current value is ${opts.resyncMs}`,
      );
    }
    const minWatchTimeoutMs = opts.minWatchTimeoutMs ?? DEFAULT_MIN_WATCH_TIMEOUT_MS;
    if (!Number.isFinite(minWatchTimeoutMs) || minWatchTimeoutMs < 1000) {
      throw new RangeError(
        `Cannot create informer as 'minWatchTimeoutMs' must be at least 1000: current value is ${minWatchTimeoutMs}`,
      );
    }
    const watchIdleTimeoutMs = opts.watchIdleTimeoutMs ?? DEFAULT_WATCH_IDLE_TIMEOUT_MS;
    if (!Number.isFinite(watchIdleTimeoutMs) || watchIdleTimeoutMs < 0) {
      throw new RangeError(
        `Cannot create informer as 'watchIdleTimeoutMs' must be zero or positive: current value is ${watchIdleTimeoutMs}`,
      );
    }
    const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isSafeInteger(pageSize) || pageSize < 0) {
      throw new RangeError(
        `Cannot create informer as 'pageSize' must be a whole number: current value is ${pageSize}`,
      );
    }
    this.#clock = deps.clock ?? realClock;
    this.#resyncMs = opts.resyncMs;
    this.#userTransform = opts.transform;
    this.#log = (deps.log ?? nullLogger).with({
      informer: opts.name ?? qualifiedResource(opts.resource),
    });
    this.#reflector = new Reflector<T>({
      kube: deps.kube,
      clock: this.#clock,
      log: this.#log,
      random: deps.random ?? Math.random,
      store: {
        replace: (items, resourceVersion) => this.#replace(items, resourceVersion),
        apply: (type, raw) => this.#apply(type, raw),
        transform: (raw) => this.#transform(raw),
      },
    }, {
      resource: opts.resource,
      minWatchTimeoutMs,
      watchIdleTimeoutMs,
      watchList: opts.watchList ?? false,
      pageSize,
      onListedObject: opts.onListedObject,
    });
  }

  /** The cached object with this key (see the class doc), or undefined. */
  get(name: string): T | undefined {
    return this.#items.get(name);
  }

  /** A new array of every cached object, in no particular order. */
  list(): T[] {
    return [...this.#items.values()];
  }

  /** True once the first list has been stored and its callbacks delivered; stays true. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /**
   * Resolves once {@link Informer.hasSynced} is true (at once if it already is).
   * @throws the signal's reason (rejects) when `signal` aborts first.
   */
  waitForSync(signal: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onSync = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#syncWaiters = this.#syncWaiters.filter((w) => w !== onSync);
        reject(signal.reason);
      };
      this.#syncWaiters.push(onSync);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Adds callbacks; they get every later event. Added after objects are cached, the handler first
   * gets (synchronously, before this returns) an `add` for each cached object, as client-go does.
   */
  addHandlers(h: EventHandlers<T>): void {
    this.#handlers.push(h);
    for (const obj of this.#items.values()) this.#call(h, "add", obj, obj);
  }

  /**
   * Lists and watches until `signal` aborts, then resolves (it never rejects for an API error: those
   * are logged and retried). Runs at most once per informer.
   * @throws {Error} (rejects) when called a second time.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error("Cannot run informer: it was already started");
    this.#started = true;
    this.#log.v(4).info("Starting informer");
    try {
      await this.#reflector.run(signal);
    } finally {
      this.#resyncTimer?.cancel();
      this.#resyncTimer = undefined;
      this.#log.v(4).info("Stopped informer");
    }
  }

  /**
   * Replaces the cache with `items` (the result of a list or of a watch list's initial events,
   * each already through {@link Informer.#transform}), delivers the callbacks, and marks the
   * informer synced.
   */
  #replace(items: T[], resourceVersion: string): void {
    const page = { items, resourceVersion };
    const fresh = new Map<string, T>();
    for (const obj of page.items) {
      const key = keyOf(obj);
      if (key === undefined) continue;
      fresh.set(key, obj);
    }
    const old = this.#items;
    this.#items = new Map(old);
    for (const [key, obj] of fresh) {
      const before = old.get(key);
      this.#items.set(key, obj);
      if (before === undefined) this.#notify("add", obj, obj);
      else this.#notify("update", before, obj);
    }
    for (const [key, before] of old) {
      if (fresh.has(key)) continue;
      this.#items.delete(key);
      this.#notify("delete", before, before);
    }
    this.#log.v(4).info("Listed", {
      resourceVersion: page.resourceVersion,
      items: this.#items.size,
    });
    if (!this.#synced) {
      this.#synced = true;
      const waiters = this.#syncWaiters;
      this.#syncWaiters = [];
      for (const w of waiters) w();
      this.#scheduleResync();
    }
  }

  /** Applies one ADDED/MODIFIED/DELETED event to the cache and the handlers. */
  #apply(type: "ADDED" | "MODIFIED" | "DELETED", raw: T): void {
    const obj = this.#transform(raw);
    const key = obj === undefined ? undefined : keyOf(obj);
    if (obj === undefined || key === undefined) {
      this.#log.v(2).info("Ignoring watch event for an object without a name", { type });
    } else if (type === "DELETED") {
      if (this.#items.delete(key)) this.#notify("delete", obj, obj);
    } else {
      const before = this.#items.get(key);
      this.#items.set(key, obj);
      if (before === undefined) this.#notify("add", obj, obj);
      else this.#notify("update", before, obj);
    }
  }

  /** Strips `metadata.managedFields` (on a copy), then runs the user's transform. */
  #transform(raw: T): T | undefined {
    if (raw === null || typeof raw !== "object") return undefined;
    const copy: T = { ...raw, metadata: { ...raw.metadata } };
    delete copy.metadata.managedFields;
    if (this.#userTransform === undefined) return copy;
    try {
      return this.#userTransform(copy);
    } catch (err) {
      this.#log.error(err, "Transform failed, object not cached", {
        object: keyOf(copy),
      });
      return undefined;
    }
  }

  /** Starts the periodic resync, once, after the first list. */
  #scheduleResync(): void {
    if (this.#resyncMs <= 0) return;
    this.#resyncTimer = this.#clock.setTimer(this.#resyncMs, () => {
      this.#log.v(4).info("Resync", { items: this.#items.size });
      for (const obj of [...this.#items.values()]) this.#notify("update", obj, obj);
      this.#scheduleResync();
    });
  }

  /** Delivers one event to every handler, in order. */
  #notify(event: "add" | "update" | "delete", oldObj: T, newObj: T): void {
    for (const h of this.#handlers.slice()) this.#call(h, event, oldObj, newObj);
  }

  /** Calls one handler; an exception is logged and goes no further. */
  #call(h: EventHandlers<T>, event: "add" | "update" | "delete", oldObj: T, newObj: T): void {
    try {
      if (event === "add") h.add?.(newObj);
      else if (event === "update") h.update?.(oldObj, newObj);
      else h.delete?.(oldObj);
    } catch (err) {
      this.#log.error(err, "Event handler failed", { event, object: keyOf(newObj) });
    }
  }
}
