/**
 * Event correlation as client-go's `tools/record/events_cache.go` does it, so that an object
 * failing for hours costs the API server one Event object whose `count` grows, not one Event per
 * failure:
 *
 * 1. **Aggregation** (`EventAggregator`): once an object has had 10 Events of the same type and
 *    reason with different messages within 10 minutes, further ones become a single
 *    "(combined from similar events): <message>" Event.
 * 2. **Observation** (`eventLogger`): an Event seen before (same source, object, type, reason and
 *    message) is not created again: the stored one is patched with the new `count`,
 *    `lastTimestamp` and `message`.
 * 3. **Spam filter** (`EventSourceObjectSpamFilter`): each (source, object, type) has a token
 *    bucket of 25 that refills one token per 5 minutes; an Event without a token is not posted.
 *    It is still counted: the next Event that gets through carries the full count.
 *
 * The correlator holds no I/O; {@link EventRecorder} posts what it decides.
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import type { KubeObject, ObjectReference } from "../kube/types.ts";
import { TokenBucket } from "../workqueue/token_bucket.ts";

/** A core/v1 Event, with the fields client-go's event recorder sets. */
export interface CoreEvent extends KubeObject {
  involvedObject: ObjectReference;
  reason: string;
  message: string;
  /** `Normal` or `Warning`. */
  type: string;
  source: { component: string; host?: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  reportingComponent: string;
  reportingInstance: string;
}

/** The merge patch that updates a stored Event for one more occurrence. */
export interface EventCountPatch {
  count: number;
  lastTimestamp: string;
  message: string;
}

/** What to do with one Event: nothing, create it, or patch the stored one. */
export type CorrelateResult =
  | { skip: true }
  | { skip: false; event: CoreEvent; patch?: EventCountPatch };

/** Tunables of {@link EventCorrelator}; the defaults are client-go's. */
export interface EventCorrelatorOptions {
  /** Entries of each cache (LRU). @default {4096} */
  cacheSize?: number;
  /** Token bucket size of the spam filter, per object. @default {25} */
  spamBurst?: number;
  /** Refill rate of the spam filter, per object. @default {1/300} */
  spamQps?: number;
  /** Distinct messages per object and reason before aggregation. @default {10} */
  aggregateMaxEvents?: number;
  /** Window of the aggregation, in ms. @default {600_000} */
  aggregateIntervalMs?: number;
}

/** The prefix client-go's `EventAggregatorByReasonMessageFunc` puts on an aggregated message. */
export const COMBINED_MESSAGE_PREFIX = "(combined from similar events): ";

/** A least-recently-used map of at most `size` entries, as `k8s.io/utils/lru`. */
class Lru<V> {
  #size: number;
  #map = new Map<string, V>();

  constructor(size: number) {
    this.#size = size;
  }

  get(key: string): V | undefined {
    const value = this.#map.get(key);
    if (value !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, value);
    }
    return value;
  }

  add(key: string, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    if (this.#map.size > this.#size) {
      const oldest = this.#map.keys().next();
      if (!oldest.done) this.#map.delete(oldest.value);
    }
  }
}

function objectKey(event: CoreEvent): string[] {
  const o = event.involvedObject;
  return [
    event.source.component,
    event.source.host ?? "",
    o.kind,
    o.namespace ?? "",
    o.name,
    o.uid ?? "",
    o.apiVersion,
  ];
}

/** client-go `getEventKey`: everything that makes two Events the same occurrence. */
function eventKey(event: CoreEvent): string {
  return JSON.stringify([...objectKey(event), event.type, event.reason, event.message]);
}

/** client-go `getSpamKey`: the source, object and type share one token bucket. */
function spamKey(event: CoreEvent): string {
  return JSON.stringify([...objectKey(event), event.type]);
}

/** client-go `EventAggregatorByReasonFunc`: the aggregate key, and the message as local key. */
function aggregateKeys(event: CoreEvent): [string, string] {
  const key = JSON.stringify([
    ...objectKey(event),
    event.type,
    event.reason,
    event.reportingComponent,
    event.reportingInstance,
  ]);
  return [key, event.message];
}

interface AggregateRecord {
  localKeys: Set<string>;
  /** Clock time (ms) of the last Event of this aggregate. */
  lastMs: number;
}

interface EventLog {
  count: number;
  firstTimestamp: string;
  name: string;
  resourceVersion?: string;
}

/** Decides, Event by Event, whether to create, patch or drop (see the module doc). */
export class EventCorrelator {
  #clock: Clock;
  #formatTime: (ms: number) => string;
  #spamBurst: number;
  #spamQps: number;
  #maxEvents: number;
  #intervalMs: number;
  #spam: Lru<TokenBucket>;
  #aggregates: Lru<AggregateRecord>;
  #logs: Lru<EventLog>;
  /** The nanosecond stamp of the last name given, so that no two names are the same. */
  #lastNanos = 0n;

  /**
   * @param deps.clock times the aggregation window and the spam filter (`now`), and gives the
   *   wall time of the names and timestamps of aggregated Events (`wallNow`).
   * @param deps.formatTime formats a wall time as an Event timestamp.
   */
  constructor(
    deps: { clock: Clock; formatTime: (ms: number) => string },
    opts: EventCorrelatorOptions = {},
  ) {
    this.#clock = deps.clock;
    this.#formatTime = deps.formatTime;
    const size = opts.cacheSize ?? 4096;
    this.#spamBurst = opts.spamBurst ?? 25;
    this.#spamQps = opts.spamQps ?? 1 / 300;
    this.#maxEvents = opts.aggregateMaxEvents ?? 10;
    this.#intervalMs = opts.aggregateIntervalMs ?? 600_000;
    this.#spam = new Lru(size);
    this.#aggregates = new Lru(size);
    this.#logs = new Lru(size);
  }

  /**
   * A new Event name as client-go gives them, `<object name>.<wall time in ns, hex>`; the time is
   * nudged forward when it would repeat an earlier name (wall time here has ms resolution).
   */
  newEventName(objectName: string): string {
    let nanos = BigInt(Math.floor(this.#clock.wallNow())) * 1_000_000n;
    if (nanos <= this.#lastNanos) nanos = this.#lastNanos + 1n;
    this.#lastNanos = nanos;
    return `${objectName}.${nanos.toString(16)}`;
  }

  /** client-go `EventCorrelate`: aggregate, observe, then filter. `event` is not modified. */
  correlate(event: CoreEvent): CorrelateResult {
    const [aggregated, key] = this.#aggregate(event);
    const [observed, patch] = this.#observe(aggregated, key);
    if (this.#filter(observed)) return { skip: true };
    return patch ? { skip: false, event: observed, patch } : { skip: false, event: observed };
  }

  /**
   * Records the Event as the API server stored it (its name and resourceVersion), so the next
   * occurrence patches it (client-go `UpdateState`).
   */
  updateState(stored: CoreEvent): void {
    this.#logs.add(eventKey(stored), {
      count: stored.count,
      firstTimestamp: stored.firstTimestamp,
      name: stored.metadata.name,
      resourceVersion: stored.metadata.resourceVersion,
    });
  }

  #aggregate(event: CoreEvent): [CoreEvent, string] {
    const now = this.#clock.now();
    const [aggregateKey, localKey] = aggregateKeys(event);
    let record = this.#aggregates.get(aggregateKey);
    if (!record || now - record.lastMs > this.#intervalMs) {
      record = { localKeys: new Set(), lastMs: now };
    }
    record.localKeys.add(localKey);
    record.lastMs = now;
    this.#aggregates.add(aggregateKey, record);
    if (record.localKeys.size < this.#maxEvents) return [event, eventKey(event)];
    // Make room for one more distinct message, as client-go's PopAny does.
    const any = record.localKeys.values().next();
    if (!any.done) record.localKeys.delete(any.value);
    const wall = this.#clock.wallNow();
    const combined: CoreEvent = {
      ...event,
      metadata: {
        name: this.newEventName(event.involvedObject.name),
        namespace: event.metadata.namespace,
      },
      count: 1,
      firstTimestamp: this.#formatTime(wall),
      lastTimestamp: this.#formatTime(wall),
      message: COMBINED_MESSAGE_PREFIX + event.message,
    };
    return [combined, aggregateKey];
  }

  #observe(event: CoreEvent, key: string): [CoreEvent, EventCountPatch | undefined] {
    const observed: CoreEvent = { ...event, metadata: { ...event.metadata } };
    const last = this.#logs.get(key);
    let patch: EventCountPatch | undefined;
    if (last && last.count > 0) {
      observed.metadata.name = last.name;
      if (last.resourceVersion !== undefined) {
        observed.metadata.resourceVersion = last.resourceVersion;
      }
      observed.firstTimestamp = last.firstTimestamp;
      observed.count = last.count + 1;
      patch = {
        count: observed.count,
        lastTimestamp: observed.lastTimestamp,
        message: observed.message,
      };
    }
    this.#logs.add(key, {
      count: observed.count,
      firstTimestamp: observed.firstTimestamp,
      name: observed.metadata.name,
      resourceVersion: observed.metadata.resourceVersion,
    });
    return [observed, patch];
  }

  /** True when the Event's (source, object, type) has no token left. */
  #filter(event: CoreEvent): boolean {
    const key = spamKey(event);
    let bucket = this.#spam.get(key);
    if (!bucket) {
      bucket = new TokenBucket({ clock: this.#clock }, {
        qps: this.#spamQps,
        burst: this.#spamBurst,
      });
    }
    this.#spam.add(key, bucket);
    return !bucket.tryTake();
  }
}
