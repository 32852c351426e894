/**
 * Lease-based leader election, a port of client-go's `tools/leaderelection` with the Lease lock
 * (`coordination.k8s.io/v1`), configured the way csi-lib-utils' `leaderelection` package
 * configures it for the CSI sidecars.
 *
 * The algorithm never compares the local clock with a time written by another replica: a
 * replica remembers the last record it saw and the local time at which that record last
 * changed (`./observed_record.ts`), and treats the lease as expired only when the record has not
 * changed for the holder's `leaseDurationSeconds` of its own clock. Writes are optimistic on
 * `metadata.resourceVersion` (`./lease_lock.ts`), so of two replicas racing for the lease exactly
 * one wins (the other gets 409 Conflict and tries again a period later).
 *
 * This file holds the loops and the terms: acquire every retry period, lead, renew in rounds of
 * up to the renew deadline, release. One attempt to acquire or renew (client-go's
 * `tryAcquireOrRenew`: the fast path, the read, the take-over) and the release's requests are
 * `./lease_attempts.ts`.
 *
 * Beyond client-go, each term has its own fence ({@link LeaseFence}, handed to
 * {@link LeaderCallbacks.onStartedLeading} with the term's signal): the leader counts as leader
 * only while `now - start < leaseDurationSeconds - margin` on its monotonic clock, `start` being
 * when its last successful acquire or renew request started. Another replica starts counting the
 * lease when it reads the record, which is after the request started, so before the fence says
 * no, nobody can have taken the lease over. A pause (SIGSTOP, a frozen VM) longer than that ends
 * the term at the first question asked after it, before any timer could fire; a renewal that
 * reads the Lease held by someone else ends it at once. See `./term_fence.ts`.
 *
 * @module
 */

import { type Clock, realClock } from "../clock.ts";
import type { LeaseFence } from "../lease_fence.ts";
import { LEASE_LAPSED_MESSAGE, TermFence } from "./term_fence.ts";
import { checkTiming, JITTER_FACTOR } from "./config.ts";
import { ObservedRecord } from "./observed_record.ts";
import { LeaseLock } from "./lease_lock.ts";
import { LeaseAttempts, type RequestSignal } from "./lease_attempts.ts";
import { linkSignal, raceAbort } from "../abort.ts";
import type { KubeApi } from "../kube/api.ts";
import type { Logger } from "../observe/logger.ts";
import type { EventSink, EventSinks } from "../events/recorder.ts";

export { JITTER_FACTOR } from "./config.ts";

/**
 * csi-lib-utils' `DefaultHealthCheckTimeout`: how long past the lease duration a leader may go
 * without renewing before {@link LeaderElector.healthCheck} reports it unhealthy.
 */
export const DEFAULT_HEALTH_CHECK_TIMEOUT_MS = 20_000;

/** The text logged when a renewal finds the Lease held by another replica. */
export const LEASE_TAKEN_MESSAGE = "Lease is held by another replica, stopping leading";

/** The leader-election metrics, as client-go reports them (`leader_election_*{name}`). */
export interface LeaderElectionMetrics {
  /** `leader_election_master_status{name}`: 0 from the start (a standby), 1 while leading. */
  setLeader(name: string, leading: boolean): void;
  /** `leader_election_slowpath_total{name}`: a renewal that had to re-read the Lease. */
  slowpathExercised?(name: string): void;
}

/** Dependencies of {@link LeaderElector}. */
export interface LeaderElectorDeps {
  /** API access for Leases (get, create, update). */
  kube: KubeApi;
  /**
   * Where the `LeaderElection` Events go ("<identity> became leader" / "stopped leading", on the
   * Lease, in its namespace), with the source client-go's leader election gives them
   * (`<lease name>/<identity>`): the attacher's one Event path, `events/recorder.ts`. No Events
   * when unset.
   */
  events?: EventSinks;
  /** Time source of every period, deadline and observation; defaults to the wall clock. */
  clock?: Clock;
  log: Logger;
  metrics?: LeaderElectionMetrics;
  /** Source of the acquire jitter, uniform in [0, 1); defaults to `Math.random`. */
  random?: () => number;
}

/** Options of {@link LeaderElector}. */
export interface LeaderElectorOptions {
  /** Lease name, e.g. `external-attacher-leader-csi-example-com` (see `leaseName()`). */
  name: string;
  /** Lease namespace (see {@link leaderElectionNamespace}). */
  namespace: string;
  /** This replica's identity (see {@link leaderIdentity}); must be unique among replicas. */
  identity: string;
  /**
   * How long a non-leader waits, after the record last changed, before taking the lease over.
   * Written into the Lease in whole seconds (`leaseDurationSeconds`).
   */
  leaseDurationMs: number;
  /** How long the leader keeps retrying a failed renewal before it gives up leadership. */
  renewDeadlineMs: number;
  /** Period of acquire attempts (jittered) and of renewals. */
  retryPeriodMs: number;
  /** Labels merged into the Lease's `metadata.labels` whenever this replica writes it. */
  labels?: Record<string, string>;
  /**
   * On cancellation, after the leader's work has finished, hand the lease back (holder "",
   * duration 1 s) so that a standby takes over at its next attempt instead of after a whole
   * lease duration.
   */
  releaseOnCancel: boolean;
  /** See {@link DEFAULT_HEALTH_CHECK_TIMEOUT_MS}. */
  healthCheckTimeoutMs?: number;
}

/** What {@link LeaderElector.run} calls as leadership comes and goes. */
export interface LeaderCallbacks {
  /**
   * Called once the lease is acquired. `leaderSignal` aborts when leadership ends (lost, or the
   * run signal aborted); the returned promise must settle soon after. The elector keeps
   * renewing the lease while the promise is pending, so work in flight stays protected.
   * Resolving early does not give up leadership (as in client-go); rejecting does: see
   * {@link LeaderElector.run}.
   *
   * `fence` is this term's lease fence (`./term_fence.ts`), to be asked right before every act
   * of the work: true while the lease of this term cannot have passed to another replica. The
   * first question that finds it closed ends the term (the leader signal aborts at once and
   * `onStoppedLeading` follows); once the term is over it stays closed, whatever later terms do.
   */
  onStartedLeading(leaderSignal: AbortSignal, fence: LeaseFence): Promise<void> | void;
  /**
   * Called when the lease was lost: it could not be renewed within the renew deadline, the
   * fence closed (the lease could have passed to another replica), or a renewal read it held by
   * another replica. Another replica may already be leading, so the caller should stop at once
   * (the sidecars exit 1). Not called when the run signal aborts.
   */
  onStoppedLeading(): void;
  /** Called when the observed holder changes (also to "" after a release). */
  onNewLeader?(identity: string): void;
}

/**
 * How one renewal round (a poll of up to `renewDeadline`) ended; `taken`: an attempt read the
 * Lease held by another replica.
 */
type RenewOutcome = "renewed" | "failed" | "taken" | "stopped";

/** One term of leadership, from acquisition to its end. */
interface Term {
  /** The leader signal's controller. */
  leader: AbortController;
  /** Aborts when the fence closes: ends the renewals and their requests. */
  lapse: AbortController;
  fence: TermFence;
}

/** How the onStartedLeading promise settled. */
type WorkOutcome = { failed: false } | { failed: true; error: unknown };

/**
 * A leader elector for one Lease. Call {@link run} once; it acquires the lease, runs the
 * leader's work, keeps renewing, and ends on loss or cancellation.
 *
 * Guarantees:
 * - The lease is taken over only when this replica saw the same record, unchanged, for the
 *   holder's lease duration of its own clock, or when the holder is empty (released). Clock skew
 *   between replicas, and whatever time another replica wrote, do not matter.
 * - Every write carries the resourceVersion last read, so concurrent writers cannot both win.
 * - `leaseTransitions` goes up by one each time the holder changes; `acquireTime` is set on
 *   acquisition and kept on renewals; `renewTime` is set on every write. Times are MicroTime
 *   strings with six fraction digits.
 * - Every request times out after the renew deadline (the acquire loop's and the release's too,
 *   unlike client-go, whose lock client has no timeout of its own).
 *
 * @example
 * ```ts
 * import type { KubeApi } from "../kube/api.ts";
 * import type { Logger } from "../observe/logger.ts";
 * import type { LeaseFence } from "../lease_fence.ts";
 * import { leaderIdentity } from "./config.ts";
 *
 * async function runElected(
 *   kube: KubeApi,
 *   log: Logger,
 *   shutdown: AbortSignal,
 *   runControllers: (signal: AbortSignal, fence: LeaseFence) => Promise<void>,
 * ): Promise<void> {
 *   const elector = new LeaderElector({ kube, log }, {
 *     name: "external-attacher-leader-csi-example-com",
 *     namespace: "kube-system",
 *     identity: leaderIdentity("node-1"),
 *     leaseDurationMs: 15_000,
 *     renewDeadlineMs: 10_000,
 *     retryPeriodMs: 5_000,
 *     releaseOnCancel: true,
 *   });
 *   await elector.run(shutdown, {
 *     onStartedLeading: (leaderSignal, fence) => runControllers(leaderSignal, fence),
 *     onStoppedLeading: () => Deno.exit(1),
 *   });
 * }
 * ```
 */
export class LeaderElector {
  #lock: LeaseLock;
  /** One acquire or renew attempt, and the release (`./lease_attempts.ts`). */
  #attempts: LeaseAttempts;
  #clock: Clock;
  #log: Logger;
  #metrics: LeaderElectionMetrics | undefined;
  #random: () => number;
  #name: string;
  #namespace: string;
  #identity: string;
  #leaseDurationMs: number;
  #renewDeadlineMs: number;
  #retryPeriodMs: number;
  #releaseOnCancel: boolean;
  #healthCheckTimeoutMs: number;

  /** The last record this replica read or wrote, and when it last changed. */
  #observed: ObservedRecord;
  /** The holder last passed to onNewLeader. */
  #reportedLeader = "";
  #running = false;
  /** Where the `LeaderElection` Events are queued; none when no sink was given. */
  #events: EventSink | undefined;
  /** The term while this replica leads. */
  #term: Term | undefined;
  /** When the last successful write naming this replica started (monotonic ms). */
  #wroteAt = -Infinity;

  /**
   * Validates the timing as client-go's `NewLeaderElector` does.
   *
   * @throws {RangeError} when a duration is not a positive finite number, when
   *   `leaseDurationMs <= renewDeadlineMs`, or when `renewDeadlineMs <= 1.2 × retryPeriodMs`.
   * @throws {TypeError} when the name, namespace or identity is empty.
   */
  constructor(deps: LeaderElectorDeps, opts: LeaderElectorOptions) {
    checkTiming(opts);
    if (opts.identity === "") throw new TypeError("Lock identity is empty");
    if (opts.name === "") throw new TypeError("Cannot create leader elector: lease name is empty");
    if (opts.namespace === "") {
      throw new TypeError("Cannot create leader elector: lease namespace is empty");
    }
    const healthCheckTimeoutMs = opts.healthCheckTimeoutMs ?? DEFAULT_HEALTH_CHECK_TIMEOUT_MS;
    if (!Number.isFinite(healthCheckTimeoutMs) || healthCheckTimeoutMs < 0) {
      throw new RangeError(
        `Cannot create leader elector: healthCheckTimeoutMs must be a non-negative number: current value is ${healthCheckTimeoutMs}`,
      );
    }
    this.#lock = new LeaseLock(deps.kube, {
      name: opts.name,
      namespace: opts.namespace,
      labels: opts.labels && Object.keys(opts.labels).length > 0 ? { ...opts.labels } : undefined,
    });
    this.#clock = deps.clock ?? realClock;
    this.#observed = new ObservedRecord(this.#clock);
    this.#log = deps.log.with({ lease: `${opts.namespace}/${opts.name}` });
    this.#metrics = deps.metrics;
    this.#random = deps.random ?? Math.random;
    this.#name = opts.name;
    this.#namespace = opts.namespace;
    this.#identity = opts.identity;
    this.#leaseDurationMs = opts.leaseDurationMs;
    this.#renewDeadlineMs = opts.renewDeadlineMs;
    this.#retryPeriodMs = opts.retryPeriodMs;
    this.#releaseOnCancel = opts.releaseOnCancel;
    this.#attempts = new LeaseAttempts({
      lock: this.#lock,
      observed: this.#observed,
      clock: this.#clock,
      log: this.#log,
      slowpathExercised: () => this.#metrics?.slowpathExercised?.(this.#name),
      wrote: (startedAt) => this.#wrote(startedAt),
    }, { identity: opts.identity, leaseDurationMs: opts.leaseDurationMs });
    // csi-lib-utils' leaderelection: `EventSource{Component: "<lock name>/<identity>"}`.
    this.#events = deps.events?.withSource({ component: `${opts.name}/${opts.identity}` });
    this.#healthCheckTimeoutMs = healthCheckTimeoutMs;
  }

  /** A write naming this replica, started at `startedAt`, succeeded: the fence moves. */
  #wrote(startedAt: number): void {
    this.#wroteAt = Math.max(this.#wroteAt, startedAt);
    this.#term?.fence.wrote(startedAt);
  }

  /** True when the last record this replica saw or wrote names it as the holder. */
  isLeader(): boolean {
    return this.#observed.record.holderIdentity === this.#identity;
  }

  /** The holder of the last record this replica saw or wrote; "" when none. */
  getLeader(): string {
    return this.#observed.record.holderIdentity;
  }

  /**
   * client-go's `HealthzAdaptor` check: an error when this replica is the leader and its
   * observed record has not changed (no successful renewal) for the lease duration plus the
   * health-check timeout, on the elector's clock; undefined otherwise. Non-leaders are always
   * healthy.
   */
  healthCheck(): Error | undefined {
    if (!this.isLeader()) return undefined;
    if (
      this.#clock.now() - this.#observed.time > this.#leaseDurationMs + this.#healthCheckTimeoutMs
    ) {
      return new Error(`failed election to renew leadership on lease ${this.#name}`);
    }
    return undefined;
  }

  /**
   * Runs the election until leadership ends:
   *
   * 1. Tries to acquire the lease every retry period (jittered by {@link JITTER_FACTOR}) until
   *    it succeeds; resolves without acquiring if `signal` aborts first.
   * 2. Calls `onStartedLeading` and renews the lease every retry period. The lease is lost when
   *    the term's fence closes (asked, or by its timer), when a renewal reads it held by
   *    another replica, or when no renewal succeeds within the renew deadline: the leader
   *    signal aborts, `onStoppedLeading` is called at once, and run() resolves once the work
   *    promise settled.
   * 3. When `signal` aborts while leading, the leader signal aborts, the elector keeps renewing
   *    until the work promise settles, then stops renewing, releases the lease if
   *    `releaseOnCancel`, and resolves.
   *
   * If `onStartedLeading` throws or rejects before `signal` aborts, the elector stops renewing
   * (without releasing, as a crash would) and run() rejects with that error.
   *
   * @throws {Error} when called while a previous run() is still running.
   */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<void> {
    if (this.#running) throw new Error("Cannot run leader elector: it is already running");
    this.#running = true;
    // A standby reports 0 from the start, as the Go sidecar's /metrics does (client-go's
    // leaderelection metrics, one series per elector from its creation).
    this.#metrics?.setLeader(this.#name, false);
    try {
      if (await this.#acquire(signal, callbacks)) await this.#lead(signal, callbacks);
    } finally {
      this.#running = false;
    }
  }

  /** The acquire loop; true once the lease is ours, false when `signal` aborted first. */
  async #acquire(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<boolean> {
    this.#log.info("Attempting to acquire leader lease");
    for (;;) {
      if (signal.aborted) return false;
      const request = this.#requestSignal(signal);
      let acquired: boolean;
      try {
        acquired = await this.#attempts.tryAcquireOrRenew(request.signal) === "ok";
      } finally {
        request.done();
      }
      this.#maybeReportTransition(callbacks);
      if (acquired) {
        this.#recordEvent("became leader");
        this.#metrics?.setLeader(this.#name, true);
        this.#log.info("Successfully acquired lease", { identity: this.#identity });
        return true;
      }
      this.#log.v(4).info("Failed to acquire lease", {
        holder: this.#observed.record.holderIdentity,
      });
      const periodMs = this.#retryPeriodMs * (1 + this.#random() * JITTER_FACTOR);
      if (!await this.#sleep(periodMs, signal)) return false;
    }
  }

  /** Leads from acquisition to the end of leadership; see {@link run}. */
  async #lead(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<void> {
    const leader = new AbortController();
    const lapse = new AbortController();
    const fence = new TermFence(
      this.#clock,
      this.#attempts.writtenSeconds(),
      this.#wroteAt,
      (err) => {
        this.#metrics?.setLeader(this.#name, false);
        this.#log.error(err, LEASE_LAPSED_MESSAGE, { identity: this.#identity });
        lapse.abort(err);
        leader.abort(err);
      },
    );
    const term: Term = { leader, lapse, fence };
    this.#term = term;
    try {
      await this.#leadTerm(signal, callbacks, term);
    } finally {
      fence.close();
      this.#term = undefined;
    }
  }

  async #leadTerm(signal: AbortSignal, callbacks: LeaderCallbacks, term: Term): Promise<void> {
    const { leader } = term;
    const stopRenewing = new AbortController();
    const renewing = this.#renewLoop(stopRenewing.signal, term.lapse.signal, callbacks);
    const work = startWork(callbacks, leader.signal, term.fence);
    // Every promise raced here settles before #lead returns (`renewing` is awaited on each
    // path, `work` is awaited); the process-long `signal` is only listened to through
    // raceAbort, which unsubscribes when the wait ends. A closed fence ends the renewals (their
    // requests and waits abort with `term.lapse`), so it reaches `lost` through `renewing`.
    const lost = renewing.then(() => "lost" as const);
    let first = await raceAbort(
      Promise.race([lost, work.then((w) => w.failed ? "failed" as const : "done" as const)]),
      signal,
    );
    // Work that ended by itself does not end the term: keep leading until lost or cancelled.
    if (first === "done") first = await raceAbort(lost, signal);
    if (first === "lost") {
      term.fence.close();
      leader.abort(new Error(`Lost lease ${this.#namespace}/${this.#name}`));
      this.#stoppedLeading(callbacks);
      this.#logWorkFailure(await work);
      return;
    }
    if (first === "failed") {
      const outcome = await work;
      term.fence.close();
      leader.abort(new Error("Leader work failed"));
      stopRenewing.abort();
      await renewing;
      this.#metrics?.setLeader(this.#name, false);
      this.#recordEvent("stopped leading");
      throw outcome.failed ? outcome.error : new Error("Leader work failed");
    }
    leader.abort(signal.reason);
    this.#log.info("Stopping leader work");
    const second = await Promise.race([lost, work.then(() => "settled" as const)]);
    this.#logWorkFailure(await work);
    if (second === "lost") {
      term.fence.close();
      this.#stoppedLeading(callbacks);
      return;
    }
    stopRenewing.abort();
    const ended = await renewing;
    if (ended !== "stopped" || term.lapse.signal.aborted) {
      term.fence.close();
      this.#stoppedLeading(callbacks);
      return;
    }
    term.fence.close();
    this.#metrics?.setLeader(this.#name, false);
    this.#recordEvent("stopped leading");
    if (this.#releaseOnCancel) await this.#attempts.release(() => this.#requestSignal());
  }

  /**
   * Renews until a renewal round fails ("failed"), finds the Lease taken ("taken"), or `stop`
   * or `cut` aborts ("stopped"); `cut` (the fence closed) also aborts a request in flight.
   */
  async #renewLoop(
    stop: AbortSignal,
    cut: AbortSignal,
    callbacks: LeaderCallbacks,
  ): Promise<Exclude<RenewOutcome, "renewed">> {
    const either = linkSignal(stop, cut);
    try {
      for (;;) {
        const outcome = await this.#renewRound(either.signal, cut);
        this.#maybeReportTransition(callbacks);
        if (outcome !== "renewed") return outcome;
        this.#log.v(5).info("Successfully renewed lease");
        if (!await this.#sleep(this.#retryPeriodMs, either.signal)) return "stopped";
      }
    } finally {
      either.dispose();
    }
  }

  /**
   * One renewal round, client-go's `PollUntilContextTimeout(retryPeriod, renewDeadline)`: an
   * attempt at once, then one every retry period, until one succeeds or the renew deadline
   * passes (which also aborts an attempt in flight). `stop` interrupts only the waits; `cut`
   * also the attempt in flight. Beyond client-go, an attempt that reads the Lease held by
   * another replica ends the round at once ("taken"): polling on cannot win it back before
   * the deadline, and meanwhile the other replica leads.
   */
  async #renewRound(stop: AbortSignal, cut: AbortSignal): Promise<RenewOutcome> {
    const deadline = new AbortController();
    const timer = this.#clock.setTimer(this.#renewDeadlineMs, () => {
      deadline.abort(
        new DOMException(
          `Lease not renewed within the renew deadline of ${this.#renewDeadlineMs} ms`,
          "TimeoutError",
        ),
      );
    });
    const request = linkSignal(deadline.signal, cut);
    try {
      for (;;) {
        const startedAt = this.#clock.now();
        const attempt = await this.#attempts.tryAcquireOrRenew(request.signal);
        if (attempt === "ok") return "renewed";
        if (cut.aborted) return "stopped";
        if (attempt === "held") {
          this.#metrics?.setLeader(this.#name, false);
          this.#log.error(
            new Error(`Lease ${this.#namespace}/${this.#name} is held by ${this.getLeader()}`),
            LEASE_TAKEN_MESSAGE,
            { holder: this.getLeader(), identity: this.#identity },
          );
          return "taken";
        }
        if (deadline.signal.aborted) break;
        const waitMs = Math.max(0, startedAt + this.#retryPeriodMs - this.#clock.now());
        const either = linkSignal(deadline.signal, stop);
        const slept = await this.#sleep(waitMs, either.signal).finally(either.dispose);
        if (!slept) {
          if (deadline.signal.aborted) break;
          return "stopped";
        }
      }
      this.#metrics?.setLeader(this.#name, false);
      this.#log.error(deadline.signal.reason, "Failed to renew lease");
      return "failed";
    } finally {
      request.dispose();
      timer.cancel();
    }
  }

  #maybeReportTransition(callbacks: LeaderCallbacks): void {
    const holder = this.#observed.record.holderIdentity;
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    try {
      callbacks.onNewLeader?.(holder);
    } catch (err) {
      this.#log.error(err, "onNewLeader callback failed", { leader: holder });
    }
  }

  #stoppedLeading(callbacks: LeaderCallbacks): void {
    this.#recordEvent("stopped leading");
    callbacks.onStoppedLeading();
  }

  #logWorkFailure(outcome: WorkOutcome): void {
    if (outcome.failed) this.#log.error(outcome.error, "Leader work failed while stopping");
  }

  /**
   * Queues a `LeaderElection` Event "<identity> <what>" about the Lease (client-go's
   * `LeaseLock.RecordEvent`); the sink posts it off this path and only logs a failure.
   */
  #recordEvent(what: string): void {
    const reference = this.#lock.reference();
    if (this.#events === undefined || reference === undefined) return;
    this.#events.record(reference, "Normal", "LeaderElection", `${this.#identity} ${what}`);
  }

  /**
   * A signal that aborts after the renew deadline, or when `parent` aborts; `done` cancels the
   * timer and drops the link to `parent` (which may live as long as the process).
   */
  #requestSignal(parent?: AbortSignal): RequestSignal {
    const timeout = new AbortController();
    const timer = this.#clock.setTimer(this.#renewDeadlineMs, () => {
      timeout.abort(
        new DOMException(
          `Lease request timed out after ${this.#renewDeadlineMs} ms`,
          "TimeoutError",
        ),
      );
    });
    if (parent === undefined) return { signal: timeout.signal, done: () => timer.cancel() };
    const either = linkSignal(parent, timeout.signal);
    return {
      signal: either.signal,
      done: () => {
        timer.cancel();
        either.dispose();
      },
    };
  }

  /** Sleeps on the clock; false when `signal` aborted first. */
  #sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    return this.#clock.sleep(ms, signal).then(() => true, () => false);
  }
}

/** Calls onStartedLeading; the result never rejects, it reports how the work ended. */
function startWork(
  callbacks: LeaderCallbacks,
  signal: AbortSignal,
  fence: LeaseFence,
): Promise<WorkOutcome> {
  let result: Promise<void> | void;
  try {
    result = callbacks.onStartedLeading(signal, fence);
  } catch (error) {
    return Promise.resolve({ failed: true, error });
  }
  return Promise.resolve(result).then(
    () => ({ failed: false }),
    (error: unknown) => ({ failed: true, error }),
  );
}
