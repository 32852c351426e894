/**
 * Kubernetes Events about objects, posted off the caller's path: {@link EventRecorder.record}
 * only queues the Event and returns; {@link EventRecorder.run} correlates each one (see
 * {@link EventCorrelator}) and creates or patches it through its own API client, so Events have
 * their own request budget and never wait in front of, or delay, an attach or detach. This is
 * the shape of client-go's `tools/record` broadcaster with its sink (`event.go`
 * `recordToSink`), which also drops Events when its queue is full.
 *
 * It is the one Event path of the attacher: the CSI handler's Events on VolumeAttachments and
 * the leader elector's `LeaderElection` Events on its Lease go through the same queue,
 * correlator and client. Each poster has its own `source` ({@link EventRecorder.withSource}),
 * as each client-go recorder made by `EventBroadcaster.NewRecorder(scheme, source)` has.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { ApiError, EVENTS, isNotFound, type KubeApi } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import { formatTime } from "../kube/time.ts";
import type { ObjectReference } from "../kube/types.ts";
import { type CoreEvent, EventCorrelator, type EventCorrelatorOptions } from "./correlator.ts";

/** `Normal` or `Warning`, the two Event types client-go defines (`v1.EventTypeNormal`). */
export type EventType = "Normal" | "Warning";

/** Who posts an Event: `source.component` (and `reportingComponent`), `source.host`. */
export interface EventSource {
  component: string;
  /** `source.host` and `reportingInstance`; "" or absent for none. */
  host?: string;
}

/** Where a component records its Events; {@link EventRecorder} is the one implementation. */
export interface EventSink {
  /**
   * Queues an Event about `object` and returns at once (it runs on the attach and detach path).
   * The message is posted as given: never pass secrets.
   */
  record(object: ObjectReference, type: EventType, reason: string, message: string): void;
}

/** What hands out {@link EventSink}s with a source of their own (client-go `NewRecorder`). */
export interface EventSinks {
  /** A sink whose Events carry `source` instead of the recorder's own. */
  withSource(source: EventSource): EventSink;
}

/** Collaborators of {@link EventRecorder}. */
export interface EventRecorderDeps {
  /** The client the Events are posted with; give it a rate limiter of its own. */
  kube: KubeApi;
  /** Times the correlation and the retry sleeps; its wall time stamps the Events. */
  clock: Clock;
  log: Logger;
}

/** Who posts the Events, and the tunables. */
export interface EventRecorderOptions {
  /** `source.component` and `reportingComponent`. */
  component: string;
  /** `source.host` and `reportingInstance`; "" for none. */
  host?: string;
  /** Events waiting to be posted; more are dropped. @default {1000} (client-go's) */
  maxQueued?: number;
  /** Tries per Event when the API server cannot be reached. @default {12} (client-go's) */
  maxTries?: number;
  /** Sleep between those tries, in ms. @default {10_000} (client-go's) */
  retrySleepMs?: number;
  correlator?: EventCorrelatorOptions;
}

/** Events of cluster-scoped objects go to this namespace, as client-go's recorder puts them. */
const CLUSTER_SCOPED_EVENT_NAMESPACE = "default";

/** Queues Events and posts them from {@link run}; see the module doc. */
export class EventRecorder implements EventSink, EventSinks {
  #deps: EventRecorderDeps;
  #component: string;
  #host: string;
  #maxQueued: number;
  #maxTries: number;
  #retrySleepMs: number;
  #correlator: EventCorrelator;
  #queue: CoreEvent[] = [];
  #wake: (() => void) | undefined;
  /** True while an Event is being correlated and posted. */
  #posting = false;
  /** Waiters of {@link idle}. */
  #idleWaiters: (() => void)[] = [];

  constructor(deps: EventRecorderDeps, opts: EventRecorderOptions) {
    this.#deps = deps;
    this.#component = opts.component;
    this.#host = opts.host ?? "";
    this.#maxQueued = opts.maxQueued ?? 1000;
    this.#maxTries = opts.maxTries ?? 12;
    this.#retrySleepMs = opts.retrySleepMs ?? 10_000;
    this.#correlator = new EventCorrelator({
      clock: deps.clock,
      formatTime,
    }, opts.correlator);
  }

  /**
   * Queues an Event about `object` with the recorder's own source and returns at once. Dropped
   * (and logged at V(4)) when the queue is full. The message is posted as given: never pass
   * secrets.
   */
  record(object: ObjectReference, type: EventType, reason: string, message: string): void {
    this.#enqueue({ component: this.#component, host: this.#host }, object, type, reason, message);
  }

  /**
   * A sink that queues its Events here (same queue, correlator, client and budget) with
   * `source` as their `source` and reporting component.
   */
  withSource(source: EventSource): EventSink {
    const own: EventSource = { component: source.component, host: source.host ?? "" };
    return {
      record: (object, type, reason, message) => this.#enqueue(own, object, type, reason, message),
    };
  }

  #enqueue(
    source: EventSource,
    object: ObjectReference,
    type: EventType,
    reason: string,
    message: string,
  ): void {
    if (this.#queue.length >= this.#maxQueued) {
      this.#deps.log.v(4).info("Event queue full, dropping Event", {
        kind: object.kind,
        name: object.name,
        reason,
      });
      return;
    }
    const wall = this.#deps.clock.wallNow();
    const host = source.host ?? "";
    const event: CoreEvent = {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        name: this.#correlator.newEventName(object.name),
        namespace: object.namespace || CLUSTER_SCOPED_EVENT_NAMESPACE,
      },
      involvedObject: { ...object },
      reason,
      message,
      type,
      source: host ? { component: source.component, host } : { component: source.component },
      firstTimestamp: formatTime(wall),
      lastTimestamp: formatTime(wall),
      count: 1,
      reportingComponent: source.component,
      reportingInstance: host,
    };
    this.#queue.push(event);
    this.#wake?.();
  }

  /** Resolves once every queued Event has been posted or given up on. */
  idle(): Promise<void> {
    if (this.#queue.length === 0 && !this.#posting) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Posts queued Events one at a time until `signal` aborts; the rest are dropped. */
  async run(signal: AbortSignal): Promise<void> {
    const onAbort = () => this.#wake?.();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      while (!signal.aborted) {
        const event = this.#queue.shift();
        if (!event) {
          for (const resolve of this.#idleWaiters.splice(0)) resolve();
          await new Promise<void>((resolve) => this.#wake = resolve);
          this.#wake = undefined;
          continue;
        }
        this.#posting = true;
        try {
          await this.#recordToSink(event, signal);
        } finally {
          this.#posting = false;
        }
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.#queue.length = 0;
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
    }
  }

  /** client-go `recordToSink`: correlate, then post with retries while the server is unreachable. */
  async #recordToSink(event: CoreEvent, signal: AbortSignal): Promise<void> {
    const result = this.#correlator.correlate(event);
    if (result.skip) return;
    for (let tries = 1;; tries++) {
      if (await this.#post(result.event, result.patch, signal)) return;
      if (tries >= this.#maxTries || signal.aborted) {
        this.#deps.log.error(new Error("retry limit exceeded"), "Unable to write event", {
          name: result.event.metadata.name,
          reason: result.event.reason,
        });
        return;
      }
      // The first sleep is randomized so that replicas do not retry in step (as client-go).
      const sleepMs = tries === 1 ? this.#retrySleepMs * Math.random() : this.#retrySleepMs;
      try {
        await this.#deps.clock.sleep(sleepMs, signal);
      } catch {
        return; // stopped while waiting to retry
      }
    }
  }

  /**
   * client-go `recordEvent`: patch the stored Event (create it if it is gone), or create a new
   * one. True when done, including when the server refused the Event (not retried); false when
   * the server could not be reached.
   */
  async #post(
    event: CoreEvent,
    patch: { count: number; lastTimestamp: string; message: string } | undefined,
    signal: AbortSignal,
  ): Promise<boolean> {
    const { kube, log } = this.#deps;
    const namespace = event.metadata.namespace;
    try {
      let stored: CoreEvent | undefined;
      if (patch) {
        try {
          stored = await kube.patch<CoreEvent>(EVENTS, event.metadata.name, {
            type: "merge",
            body: patch,
          }, { namespace, signal });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }
      if (!stored) {
        const fresh: CoreEvent = { ...event, metadata: { ...event.metadata } };
        delete fresh.metadata.resourceVersion;
        stored = await kube.create<CoreEvent>(EVENTS, fresh, { namespace, signal });
      }
      this.#correlator.updateState(stored);
      return true;
    } catch (err) {
      if (err instanceof ApiError && err.code !== 0) {
        // The server answered: something about the Event is wrong, and retrying will not help.
        const fields = { name: event.metadata.name, reason: event.reason, error: err.message };
        if (err.code === 409) log.v(5).info("Server rejected event (will not retry)", fields);
        else log.error(err, "Server rejected event (will not retry)", fields);
        return true;
      }
      log.error(err, "Unable to write event (may retry after sleeping)", {
        name: event.metadata.name,
        reason: event.reason,
      });
      return false;
    }
  }
}
