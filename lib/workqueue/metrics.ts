/**
 * The metrics seam of the workqueues, after client-go's `util/workqueue/metrics.go`.
 *
 * A {@link QueueMetricsProvider} creates one set of metrics per queue name; each method maps
 * one-to-one onto a labelled child of a metric (`lib/wire/prometheus/registry.ts`), e.g.
 * `newDepthMetric: (name) => depthGauge.labels({ name })`. The metric names client-go's provider
 * registers are `workqueue_depth`, `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
 * `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`,
 * `workqueue_longest_running_processor_seconds` and `workqueue_retries_total`, all labelled
 * `name`.
 *
 * @module
 */

import type { Clock } from "../clock.ts";

/** A gauge that goes up and down by one (a `Gauge` child). */
export interface GaugeMetric {
  inc(): void;
  dec(): void;
}

/** A gauge that is set to a value (a `Gauge` child). */
export interface SettableGaugeMetric {
  set(value: number): void;
}

/** A monotonically increasing counter (a `Counter` child). */
export interface CounterMetric {
  inc(): void;
}

/** A distribution of observed values (a `Histogram` child). */
export interface HistogramMetric {
  observe(value: number): void;
}

/**
 * Creates the metrics of one queue. Each method is called once per queue, at construction, with
 * the queue's name. All durations are reported in seconds.
 */
export interface QueueMetricsProvider {
  /** `workqueue_depth`: how many keys are waiting (dirty and not yet handed out). */
  newDepthMetric(name: string): GaugeMetric;
  /** `workqueue_adds_total`: how many adds the queue accepted (folded duplicates excluded). */
  newAddsMetric(name: string): CounterMetric;
  /** `workqueue_queue_duration_seconds`: how long a key waited before it was handed out. */
  newLatencyMetric(name: string): HistogramMetric;
  /** `workqueue_work_duration_seconds`: how long processing a key took (get to done). */
  newWorkDurationMetric(name: string): HistogramMetric;
  /** `workqueue_unfinished_work_seconds`: the summed age of all keys being processed. */
  newUnfinishedWorkSecondsMetric(name: string): SettableGaugeMetric;
  /** `workqueue_longest_running_processor_seconds`: the age of the oldest key in processing. */
  newLongestRunningProcessorSecondsMetric(name: string): SettableGaugeMetric;
  /** `workqueue_retries_total`: how many delayed (rate-limited) adds the queue received. */
  newRetriesMetric(name: string): CounterMetric;
}

const noopGauge: GaugeMetric & SettableGaugeMetric = Object.freeze({
  inc() {},
  dec() {},
  set() {},
});
const noopCounter: CounterMetric = Object.freeze({ inc() {} });
const noopHistogram: HistogramMetric = Object.freeze({ observe() {} });

/**
 * A provider whose metrics record nothing. Queues given this provider (or none) skip all
 * bookkeeping and run no update timer.
 */
export const noopQueueMetricsProvider: QueueMetricsProvider = Object.freeze({
  newDepthMetric: () => noopGauge,
  newAddsMetric: () => noopCounter,
  newLatencyMetric: () => noopHistogram,
  newWorkDurationMetric: () => noopHistogram,
  newUnfinishedWorkSecondsMetric: () => noopGauge,
  newLongestRunningProcessorSecondsMetric: () => noopGauge,
  newRetriesMetric: () => noopCounter,
});

/**
 * True when a queue named `name` should record metrics through `provider`: a provider is given,
 * it is not {@link noopQueueMetricsProvider}, and the name is not empty (client-go records no
 * metrics for unnamed queues).
 */
export function metricsEnabled(
  provider: QueueMetricsProvider | undefined,
  name: string,
): provider is QueueMetricsProvider {
  return provider !== undefined && provider !== noopQueueMetricsProvider && name !== "";
}

/** Dependencies of {@link QueueMetrics}. */
export interface QueueMetricsDeps {
  clock: Clock;
  provider: QueueMetricsProvider;
}

/** Options of {@link QueueMetrics}. */
export interface QueueMetricsOptions {
  /** The queue name, the `name` label of every metric. */
  name: string;
}

/**
 * The per-queue bookkeeping behind the metrics: when the processing of each handed-out key
 * started. The queue calls {@link QueueMetrics.add} when a key becomes dirty,
 * {@link QueueMetrics.get} when it is handed out (with the time it was added: the queue keeps it
 * with the key, where client-go's metrics keep an `addTimes` map of their own) and
 * {@link QueueMetrics.done} when it is done, and {@link QueueMetrics.updateUnfinishedWork}
 * periodically.
 *
 * Guarantees: the depth gauge goes up once per accepted add and down once per hand-out, so it
 * returns to its start when every key has been handed out; each key contributes at most one
 * latency and one work-duration observation per add/get/done cycle.
 */
export class QueueMetrics {
  #clock: Clock;
  #depth: GaugeMetric;
  #adds: CounterMetric;
  #latency: HistogramMetric;
  #workDuration: HistogramMetric;
  #unfinishedWork: SettableGaugeMetric;
  #longestRunning: SettableGaugeMetric;
  /** When processing of each handed-out key started (ms, queue clock). */
  #processingStartTimes = new Map<string, number>();

  constructor(deps: QueueMetricsDeps, opts: QueueMetricsOptions) {
    const p = deps.provider;
    this.#clock = deps.clock;
    this.#depth = p.newDepthMetric(opts.name);
    this.#adds = p.newAddsMetric(opts.name);
    this.#latency = p.newLatencyMetric(opts.name);
    this.#workDuration = p.newWorkDurationMetric(opts.name);
    this.#unfinishedWork = p.newUnfinishedWorkSecondsMetric(opts.name);
    this.#longestRunning = p.newLongestRunningProcessorSecondsMetric(opts.name);
  }

  /** Records that a key became dirty (an add that was not folded into a waiting one). */
  add(): void {
    this.#adds.inc();
    this.#depth.inc();
  }

  /**
   * Records that `key`, added at `addedAt` (ms of the queue clock), was handed to a worker;
   * observes how long it waited.
   */
  get(key: string, addedAt: number): void {
    const now = this.#clock.now();
    this.#depth.dec();
    this.#processingStartTimes.set(key, now);
    this.#latency.observe(secondsBetween(addedAt, now));
  }

  /**
   * Records that a key left without being handed out (it moved to another lane of the queue):
   * the depth goes down and no latency is observed.
   */
  withdraw(): void {
    this.#depth.dec();
  }

  /** Records that the worker finished `key`; observes how long it worked on it. */
  done(key: string): void {
    const startedAt = this.#processingStartTimes.get(key);
    if (startedAt !== undefined) {
      this.#workDuration.observe(secondsBetween(startedAt, this.#clock.now()));
      this.#processingStartTimes.delete(key);
    }
  }

  /** Sets the unfinished-work and longest-running-processor gauges from the keys in processing. */
  updateUnfinishedWork(): void {
    const now = this.#clock.now();
    let total = 0;
    let oldest = 0;
    for (const startedAt of this.#processingStartTimes.values()) {
      const age = secondsBetween(startedAt, now);
      total += age;
      if (age > oldest) oldest = age;
    }
    this.#unfinishedWork.set(total);
    this.#longestRunning.set(oldest);
  }
}

function secondsBetween(fromMs: number, toMs: number): number {
  return Math.max(0, toMs - fromMs) / 1000;
}
