/**
 * The list/watch loop of an {@link import("./informer.ts").Informer}, as client-go's reflector
 * (`tools/cache/reflector.go`, `ListAndWatch`): LIST (page by page) or a watch list, then WATCH
 * from the last resourceVersion, resumed when the server closes it, listed again after 410 Gone,
 * every failure retried after the reflector's backoff. What it lists and watches goes into a
 * {@link ReflectorStore} (the informer's cache and handlers); the resourceVersion to resume from
 * is the reflector's own (client-go's `lastSyncResourceVersion`).
 *
 * @module
 */

import type { Clock, Timer } from "../clock.ts";
import { errorText } from "../errors.ts";
import { ApiError, type KubeApi, type ObjectList, type Resource, type WatchEvent } from "./api.ts";
import type { Logger } from "../observe/logger.ts";
import type { KubeObject, Status } from "./types.ts";
import { statusMessage, statusReason } from "./request/status_errors.ts";

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

/** Where a {@link Reflector} puts what it lists and watches: the informer's cache. */
export interface ReflectorStore<T extends KubeObject> {
  /**
   * Replaces the cache with `items` (a list's or a watch list's initial events, each through
   * {@link ReflectorStore.transform}) and marks it synced.
   */
  replace(items: T[], resourceVersion: string): void;
  /** Applies one watch event's object, as it came (not yet transformed). */
  apply(type: "ADDED" | "MODIFIED" | "DELETED", raw: T): void;
  /** The object as the cache keeps it, or undefined when it is not kept. */
  transform(raw: T): T | undefined;
}

/** Collaborators of a {@link Reflector}. */
export interface ReflectorDeps<T extends KubeObject> {
  /** Only `list` and `watch` are called. */
  kube: KubeApi;
  clock: Clock;
  /** Bound to the informer's name. */
  log: Logger;
  random: () => number;
  store: ReflectorStore<T>;
}

/** What a {@link Reflector} lists and watches and how (see `InformerOptions`), checked. */
export interface ReflectorSettings {
  resource: Resource;
  minWatchTimeoutMs: number;
  /** 0: no idle timeout. */
  watchIdleTimeoutMs: number;
  watchList: boolean;
  /** 0: one answer. */
  pageSize: number;
  onListedObject?: () => void;
}

/** Lists and watches one resource into a {@link ReflectorStore}; see the module doc. */
export class Reflector<T extends KubeObject> {
  readonly #kube: KubeApi;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #random: () => number;
  readonly #store: ReflectorStore<T>;
  readonly #resource: Resource;
  readonly #minWatchTimeoutMs: number;
  readonly #watchIdleTimeoutMs: number;
  readonly #watchList: boolean;
  readonly #pageSize: number;
  readonly #onListedObject: (() => void) | undefined;
  /** The resourceVersion of the last list, object event or bookmark; "" before the first list. */
  #resourceVersion = "";

  constructor(deps: ReflectorDeps<T>, settings: ReflectorSettings) {
    this.#kube = deps.kube;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#random = deps.random;
    this.#store = deps.store;
    this.#resource = settings.resource;
    this.#minWatchTimeoutMs = settings.minWatchTimeoutMs;
    this.#watchIdleTimeoutMs = settings.watchIdleTimeoutMs;
    this.#watchList = settings.watchList;
    this.#pageSize = settings.pageSize;
    this.#onListedObject = settings.onListedObject;
  }

  /** Lists and watches until `signal` aborts, then resolves; API errors are logged and retried. */
  async run(signal: AbortSignal): Promise<void> {
    const backoff = new ReflectorBackoff(this.#clock, this.#random);
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
        const obj = this.#store.transform(item);
        if (obj !== undefined) items.push(obj);
        this.#onListedObject?.();
      }
      resourceVersion = page.resourceVersion;
      if (page.continue === undefined || page.continue === "") break;
      next = page.continue;
    }
    this.#replace(items, resourceVersion);
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
      const obj = this.#store.transform(event.object);
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

  /** Applies one watch event: its object to the store, its resourceVersion to the next watch. */
  #apply(type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK", raw: T): void {
    const rv = raw?.metadata?.resourceVersion;
    if (type !== "BOOKMARK") this.#store.apply(type, raw);
    if (rv) this.#resourceVersion = rv;
  }

  /** Replaces the store's cache; the next watch goes on from `resourceVersion`. */
  #replace(items: T[], resourceVersion: string): void {
    this.#store.replace(items, resourceVersion);
    this.#resourceVersion = resourceVersion;
  }
}
