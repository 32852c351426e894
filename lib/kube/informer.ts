/**
 * A reflector and shared informer in one small class: LIST, then WATCH from the list's
 * resourceVersion, keep the objects in memory and deliver add/update/delete callbacks, the way
 * client-go's `tools/cache` reflector and shared informer do.
 *
 * We do not use client-node's `ListWatch`/`makeInformer`: it stops for good on any error other
 * than 410, sends no watch timeout and requests no bookmarks (client-node 1.4.0 `src/cache.ts`,
 * `src/watch.ts`; https://github.com/kubernetes-client/javascript/issues/958).
 *
 * @module
 */

import { type Clock, realClock, type Timer } from "../clock.ts";
import { errorText } from "../errors.ts";
import {
  ApiError,
  type KubeApi,
  type ObjectList,
  qualifiedResource,
  type Resource,
  type WatchEvent,
} from "./api.ts";
import type { Logger } from "../observe/logger.ts";
import { nullLogger } from "../observe/logger.ts";
import type { EventHandlers, ObjectStore } from "./store.ts";
import type { KubeObject, Status } from "./types.ts";
import { statusMessage, statusReason } from "./request/status_errors.ts";

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

/** First wait after a failure (client-go reflector: 800ms). */
const BACKOFF_INITIAL_MS = 800;
/** Largest base wait; the jittered wait is below twice this (client-go: 30s, jitter 1.0). */
const BACKOFF_MAX_MS = 30_000;
/** With no failure for this long, the next wait starts again at the initial one (client-go: 2m). */
const BACKOFF_RESET_MS = 120_000;
/** A watch that ends cleanly this soon with no event counts as a failure (client-go: 1s). */
const SHORT_WATCH_MS = 1_000;
/**
 * The watch is cancelled from our side this long after the server should have closed it, so a
 * half-open connection cannot hang the informer
 * (https://github.com/kubernetes-client/javascript/issues/1496).
 */
const WATCH_DEADLINE_GRACE_MS = 30_000;
const DEFAULT_MIN_WATCH_TIMEOUT_MS = 300_000;
const DEFAULT_WATCH_IDLE_TIMEOUT_MS = 30_000;
const DEFAULT_PAGE_SIZE = 500;
/** The annotation of the BOOKMARK that ends the initial events of a watch list. */
export const INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end";

/** What ended one watch, and so what the loop does next. */
type WatchOutcome =
  /** The server (or our deadline) closed it: watch again from the last resourceVersion. */
  | { kind: "ended" }
  | { kind: "aborted" }
  | Failure;

/** What went wrong, and so what comes after the backoff. */
type Failure =
  /** A LIST failed: list again. */
  | { kind: "list-failed"; err: unknown }
  /** 410 Gone / Expired (a rejected watch or an ERROR event): list again. */
  | { kind: "expired"; err: ApiError }
  /** Any other watch failure: watch again from the last resourceVersion. */
  | { kind: "failed"; err: unknown };

/** How a watch list ended: as a watch, or before its initial events were complete. */
type WatchListOutcome = WatchOutcome | { kind: "incomplete"; err?: unknown };

/**
 * client-go's `exponentialBackoffManagerImpl` with the reflector's settings: the base wait doubles
 * from 800ms up to 30s, each wait adds up to 100% jitter (so it lies in [base, 2 × base)), and the
 * base starts over when the previous backoff began more than 2 minutes ago (a watch that lasted a
 * while).
 */
class ReflectorBackoff {
  #clock: Clock;
  #random: () => number;
  #nextBaseMs = BACKOFF_INITIAL_MS;
  #lastStart: number;

  constructor(clock: Clock, random: () => number) {
    this.#clock = clock;
    this.#random = random;
    this.#lastStart = clock.now();
  }

  /** The wait before the next attempt, in milliseconds. */
  next(): number {
    const now = this.#clock.now();
    if (now - this.#lastStart > BACKOFF_RESET_MS) this.#nextBaseMs = BACKOFF_INITIAL_MS;
    this.#lastStart = now;
    const base = this.#nextBaseMs;
    this.#nextBaseMs = Math.min(base * 2, BACKOFF_MAX_MS);
    return Math.floor(base * (1 + this.#random()));
  }
}

/**
 * True for HTTP 410 Gone, which the API server sends (reason `Expired` or `Gone`) when the
 * resourceVersion asked for has been compacted away.
 */
function isExpired(err: unknown): err is ApiError {
  return err instanceof ApiError && err.code === 410;
}

/** The API error an `ERROR` watch event stands for. */
function statusError(status: Status | undefined): ApiError {
  return new ApiError(
    status?.code ?? 0,
    statusReason(status) ?? "",
    statusMessage(status) ?? "watch returned an ERROR event",
  );
}

/**
 * The cache key of `obj`: `name` for cluster-scoped objects, `namespace/name` for namespaced ones
 * (client-go's `MetaNamespaceKeyFunc`), or undefined when the object has no name.
 */
function keyOf(obj: KubeObject): string | undefined {
  const meta = obj?.metadata;
  if (typeof meta?.name !== "string" || meta.name === "") return undefined;
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** A failed watch as a {@link Failure}: 410 Gone / Expired is `expired`. */
function failureOf(err: unknown): Failure {
  return isExpired(err) ? { kind: "expired", err } : { kind: "failed", err };
}

/**
 * One watch request of an informer: its events, one at a time, under a signal of its own that
 * the caller's signal and the watch's deadline abort (`timeoutSeconds` plus
 * {@link WATCH_DEADLINE_GRACE_MS}); counts the events and remembers whether the deadline hit.
 */
class WatchStream<T extends KubeObject> {
  readonly timeoutSeconds: number;
  readonly startedAt: number;
  /** The caller's signal. */
  readonly signal: AbortSignal;
  events = 0;
  deadlineHit = false;
  readonly #ctl = new AbortController();
  readonly #onAbort: () => void;
  readonly #deadline: Timer;
  readonly #events: AsyncIterator<WatchEvent<T>>;

  constructor(
    clock: Clock,
    signal: AbortSignal,
    timeoutSeconds: number,
    open: (signal: AbortSignal) => AsyncIterable<WatchEvent<T>>,
  ) {
    this.signal = signal;
    this.timeoutSeconds = timeoutSeconds;
    this.startedAt = clock.now();
    this.#onAbort = () => this.#ctl.abort(signal.reason);
    signal.addEventListener("abort", this.#onAbort, { once: true });
    this.#deadline = clock.setTimer(timeoutSeconds * 1000 + WATCH_DEADLINE_GRACE_MS, () => {
      this.deadlineHit = true;
      this.#ctl.abort(new Error("watch outlived its timeoutSeconds"));
    });
    this.#events = open(this.#ctl.signal)[Symbol.asyncIterator]();
  }

  /** The next event, counted. */
  async next(): Promise<IteratorResult<WatchEvent<T>>> {
    const next = await this.#events.next();
    if (!next.done) this.events++;
    return next;
  }

  /** Cancels the watch and its deadline; the stream is closed. */
  stop(): void {
    this.#deadline.cancel();
    this.signal.removeEventListener("abort", this.#onAbort);
    this.#ctl.abort();
    this.#events.return?.().catch(() => {});
  }
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
  #kube: KubeApi;
  #clock: Clock;
  #log: Logger;
  #random: () => number;
  #resource: Resource;
  #resyncMs: number;
  #minWatchTimeoutMs: number;
  #watchIdleTimeoutMs: number;
  #watchList: boolean;
  #pageSize: number;
  #userTransform: ((obj: T) => T) | undefined;
  #onListedObject: (() => void) | undefined;

  /** The cache. Invariant: every value has been through {@link Informer.#transform}. */
  #items = new Map<string, T>();
  #handlers: EventHandlers<T>[] = [];
  /** The resourceVersion of the last list, object event or bookmark; "" before the first list. */
  #resourceVersion = "";
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
    this.#watchIdleTimeoutMs = watchIdleTimeoutMs;
    this.#watchList = opts.watchList ?? false;
    const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isSafeInteger(pageSize) || pageSize < 0) {
      throw new RangeError(
        `Cannot create informer as 'pageSize' must be a whole number: current value is ${pageSize}`,
      );
    }
    this.#pageSize = pageSize;
    this.#kube = deps.kube;
    this.#clock = deps.clock ?? realClock;
    this.#random = deps.random ?? Math.random;
    this.#resource = opts.resource;
    this.#resyncMs = opts.resyncMs;
    this.#minWatchTimeoutMs = minWatchTimeoutMs;
    this.#userTransform = opts.transform;
    this.#onListedObject = opts.onListedObject;
    this.#log = (deps.log ?? nullLogger).with({
      informer: opts.name ?? qualifiedResource(opts.resource),
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
    const backoff = new ReflectorBackoff(this.#clock, this.#random);
    this.#log.v(4).info("Starting informer");
    try {
      let needList = true;
      while (!signal.aborted) {
        const outcome: WatchOutcome = needList
          ? await this.#listAndWatch(signal)
          : await this.#watch(signal);
        if (outcome.kind === "aborted") break;
        // A list, or a watch list's complete initial events, synced the cache: only a failed
        // list or a 410 asks for another.
        needList = outcome.kind === "list-failed" || outcome.kind === "expired";
        if (outcome.kind === "ended") continue;
        if (!await this.#backOff(outcome, backoff, signal)) break;
      }
    } finally {
      this.#resyncTimer?.cancel();
      this.#resyncTimer = undefined;
      this.#log.v(4).info("Stopped informer");
    }
  }

  /**
   * Fills the cache, then watches from it: by a watch list when enabled (its initial events
   * replace the cache and the same stream goes on as a watch), else, or when the watch list ends
   * before its initial events are complete, by a LIST and then a watch.
   */
  async #listAndWatch(signal: AbortSignal): Promise<WatchOutcome> {
    if (this.#watchList) {
      const outcome = await this.#watchListStream(signal);
      if (outcome.kind !== "incomplete") return outcome;
      this.#log.info(
        "The watch list ended before its initial events were complete, falling back to a list",
        { error: outcome.err === undefined ? undefined : errorText(outcome.err) },
      );
    }
    try {
      await this.#listAndReplace(signal);
    } catch (err) {
      return signal.aborted ? { kind: "aborted" } : { kind: "list-failed", err };
    }
    return signal.aborted ? { kind: "aborted" } : await this.#watch(signal);
  }

  /**
   * Logs a failure, the same way whichever path met it, and waits out the next backoff step;
   * false when `signal` aborted instead. A 410 is expected (the server compacted past our
   * resourceVersion) and logged at V(4), as client-go's reflector logs an expired watch.
   */
  async #backOff(
    failure: Failure,
    backoff: ReflectorBackoff,
    signal: AbortSignal,
  ): Promise<boolean> {
    const retryAfterMs = backoff.next();
    if (failure.kind === "list-failed") {
      this.#log.error(failure.err, "Failed to list", { retryAfterMs });
    } else if (failure.kind === "expired") {
      this.#log.v(4).info("Watch expired, listing again", {
        resourceVersion: this.#resourceVersion,
        reason: failure.err.reason,
        message: failure.err.message,
        retryAfterMs,
      });
    } else {
      this.#log.error(failure.err, "Failed to watch", {
        resourceVersion: this.#resourceVersion,
        retryAfterMs,
      });
    }
    return await this.#sleep(retryAfterMs, signal);
  }

  /** Waits `ms` on the clock; false when `signal` aborted instead. */
  async #sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      await this.#clock.sleep(ms, signal);
      return true;
    } catch (err) {
      if (signal.aborted) return false;
      throw err;
    }
  }

  /**
   * One LIST, page by page (client-go's `tools/pager/pager.go`): replaces the cache, delivers the
   * callbacks, and marks the informer synced.
   */
  async #listAndReplace(signal: AbortSignal): Promise<void> {
    const items: T[] = [];
    let resourceVersion = "";
    let limit = this.#pageSize;
    let next: string | undefined;
    for (;;) {
      // No resourceVersion: a consistent read, so the new cache is never older than the old one.
      let page: ObjectList<T>;
      try {
        page = await this.#kube.list<T>(this.#resource, {
          signal,
          ...(limit > 0 ? { limit } : {}),
          ...(next !== undefined ? { continue: next } : {}),
        });
      } catch (err) {
        if (next === undefined || !isExpired(err) || signal.aborted) throw err;
        // The state the pages came from was compacted: list everything again, in one answer
        // (the pager's FullListIfExpired).
        this.#log.v(2).info("List continue token expired, listing again without pages", {
          items: items.length,
        });
        items.length = 0;
        limit = 0;
        next = undefined;
        continue;
      }
      if (signal.aborted) return;
      // Each item is trimmed as its page arrives: the page's whole objects are garbage at once,
      // instead of every page's until the last one.
      for (const item of page.items ?? []) {
        const obj = this.#transform(item);
        if (obj !== undefined) items.push(obj);
        this.#onListedObject?.();
      }
      resourceVersion = page.resourceVersion;
      if (page.continue === undefined || page.continue === "") break;
      next = page.continue;
    }
    this.#replace(items, resourceVersion);
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
    this.#resourceVersion = page.resourceVersion;
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

  /** One WATCH from the last resourceVersion, applied to the cache until it ends. */
  async #watch(signal: AbortSignal): Promise<WatchOutcome> {
    const watch = this.#startWatch(signal, false);
    try {
      return await this.#applyEvents(watch);
    } finally {
      watch.stop();
    }
  }

  /**
   * One watch list: its ADDED events are gathered until the initial-events-end bookmark, which
   * replaces the cache with them; then the same stream goes on as a watch. Any end before that
   * bookmark is "incomplete" (the caller lists instead).
   */
  async #watchListStream(signal: AbortSignal): Promise<WatchListOutcome> {
    const watch = this.#startWatch(signal, true);
    try {
      const incomplete = await this.#initialEvents(watch);
      if (incomplete !== undefined) return incomplete;
      return await this.#applyEvents(watch);
    } catch (err) {
      return signal.aborted ? { kind: "aborted" } : { kind: "incomplete", err };
    } finally {
      watch.stop();
    }
  }

  /**
   * Reads a watch list's initial events up to its end bookmark and replaces the cache with them;
   * undefined when it did, else how the stream ended before. The gathered objects live only in
   * this call: a suspended caller would keep them (the first version of every object) for as long
   * as the watch that follows stays open.
   */
  async #initialEvents(watch: WatchStream<T>): Promise<WatchListOutcome | undefined> {
    const gathered: T[] = [];
    for (let next = await watch.next(); !next.done; next = await watch.next()) {
      const event = next.value;
      if (event.type === "BOOKMARK") {
        if (event.object?.metadata?.annotations?.[INITIAL_EVENTS_END_ANNOTATION] !== "true") {
          continue;
        }
        this.#replace(gathered, event.object.metadata.resourceVersion ?? "");
        return undefined;
      }
      if (event.type !== "ADDED") {
        const err = event.type === "ERROR"
          ? statusError(event.object)
          : new Error(`${event.type} before the initial events ended`);
        return { kind: "incomplete", err };
      }
      // Trimmed as it arrives, as a list page's items are.
      const obj = this.#transform(event.object);
      if (obj !== undefined) gathered.push(obj);
      this.#onListedObject?.();
    }
    return watch.signal.aborted ? { kind: "aborted" } : { kind: "incomplete" };
  }

  /**
   * Applies the events of `watch` to the cache until the stream ends, and says how it ended: an
   * `ERROR` event or a rejection is a failure (410: expired); the server closing the stream, or
   * our deadline closing it for the server, is a normal end, unless the watch closed at once
   * without an event.
   */
  async #applyEvents(watch: WatchStream<T>): Promise<WatchOutcome> {
    try {
      for (let next = await watch.next(); !next.done; next = await watch.next()) {
        const event = next.value;
        if (event.type === "ERROR") return failureOf(statusError(event.object));
        this.#apply(event.type, event.object);
      }
    } catch (err) {
      if (watch.signal.aborted) return { kind: "aborted" };
      // A client may reject when we cancel the watch at its deadline: that is a normal end.
      if (!watch.deadlineHit) return failureOf(err);
    }
    if (watch.signal.aborted) return { kind: "aborted" };
    if (watch.deadlineHit) {
      this.#log.v(2).info("Watch cancelled: the server did not close it in time", {
        timeoutSeconds: watch.timeoutSeconds,
      });
      return { kind: "ended" };
    }
    const lastedMs = this.#clock.now() - watch.startedAt;
    if (watch.events === 0 && lastedMs < SHORT_WATCH_MS) {
      return {
        kind: "failed",
        err: new Error(`Unexpected watch close: it lasted ${lastedMs}ms and delivered no event`),
      };
    }
    this.#log.v(4).info("Watch closed", {
      resourceVersion: this.#resourceVersion,
      events: watch.events,
    });
    return { kind: "ended" };
  }

  /**
   * Opens a watch (a watch list with `initial`) from the last resourceVersion, with a random
   * `timeoutSeconds` and a deadline of its own a little after it: a server that overruns its
   * timeout has the watch cancelled.
   */
  #startWatch(signal: AbortSignal, initial: boolean): WatchStream<T> {
    const timeoutSeconds = Math.floor((this.#minWatchTimeoutMs / 1000) * (1 + this.#random()));
    return new WatchStream<T>(
      this.#clock,
      signal,
      timeoutSeconds,
      (ctl) =>
        this.#kube.watch<T>(this.#resource, {
          resourceVersion: initial ? "" : this.#resourceVersion,
          timeoutSeconds,
          allowWatchBookmarks: true,
          signal: ctl,
          ...(this.#watchIdleTimeoutMs > 0 ? { idleTimeoutMs: this.#watchIdleTimeoutMs } : {}),
          ...(initial ? { sendInitialEvents: true } : {}),
        }),
    );
  }

  /** Applies one ADDED/MODIFIED/DELETED/BOOKMARK event to the cache and the handlers. */
  #apply(type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK", raw: T): void {
    const rv = raw?.metadata?.resourceVersion;
    if (type === "BOOKMARK") {
      if (rv) this.#resourceVersion = rv;
      return;
    }
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
    if (rv) this.#resourceVersion = rv;
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
