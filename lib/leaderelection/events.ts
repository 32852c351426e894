/**
 * The `LeaderElection` Events a leader elector posts about its Lease ("<identity> became leader",
 * "<identity> stopped leading"), shaped as client-go's `tools/record` event recorder posts them
 * for `tools/leaderelection/resourcelock` (`LeaseLock.RecordEvent`).
 *
 * @module
 */

import type { Clock } from "../clock.ts";
import { EVENTS, type KubeApi } from "../kube/api.ts";
import type { KubeObject, Lease } from "../kube/types.ts";
import type { Logger } from "../observe/logger.ts";
import { formatTime } from "../kube/time.ts";

/** A core/v1 Event, as client-go's event recorder posts it. */
interface CoreEvent extends KubeObject {
  involvedObject: Record<string, string | undefined>;
  reason: string;
  message: string;
  type: string;
  source: { component: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  reportingComponent: string;
  reportingInstance: string;
}

/** Dependencies of {@link LeaderEventRecorder}. */
export interface LeaderEventRecorderDeps {
  kube: KubeApi;
  clock: Clock;
  log: Logger;
}

/** Which Lease the Events are about, and who posts them. */
export interface LeaderEventRecorderOptions {
  /** Lease name. */
  name: string;
  /** Lease namespace; the Events go there too. */
  namespace: string;
  /** This replica's identity, the subject of every message. */
  identity: string;
}

/** Posts `LeaderElection` Events; {@link flush} waits for the posts in flight. */
export class LeaderEventRecorder {
  #deps: LeaderEventRecorderDeps;
  #opts: LeaderEventRecorderOptions;
  #pending = new Set<Promise<void>>();
  /** Posts so far: the sub-millisecond digits of the next Event's name. */
  #sequence = 0;

  constructor(deps: LeaderEventRecorderDeps, opts: LeaderEventRecorderOptions) {
    this.#deps = deps;
    this.#opts = opts;
  }

  /** Posts "<identity> <what>" about `lease`; a failure is only logged. */
  record(lease: Lease, what: string, signal: AbortSignal): Promise<void> {
    const { name, namespace, identity } = this.#opts;
    const nowMs = this.#deps.clock.wallNow();
    const component = `${name}/${identity}`;
    const event: CoreEvent = {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        // client-go names an Event `<object>.<UnixNano in hex>`; our clock reads milliseconds, so
        // a sequence fills the nanoseconds: two Events in one millisecond must not share a name
        // (the second create would fail with AlreadyExists).
        name: `${name}.${
          (BigInt(Math.floor(nowMs)) * 1_000_000n + BigInt(this.#sequence++ % 1_000_000))
            .toString(16)
        }`,
        namespace,
      },
      involvedObject: {
        kind: "Lease",
        apiVersion: "coordination.k8s.io/v1",
        namespace,
        name,
        uid: lease.metadata.uid,
        resourceVersion: lease.metadata.resourceVersion,
      },
      reason: "LeaderElection",
      message: `${identity} ${what}`,
      type: "Normal",
      source: { component },
      firstTimestamp: formatTime(nowMs),
      lastTimestamp: formatTime(nowMs),
      count: 1,
      reportingComponent: component,
      reportingInstance: "",
    };
    const posted: Promise<void> = this.#deps.kube.create<CoreEvent>(EVENTS, event, {
      namespace,
      signal,
    }).then(
      () => {},
      (err) => this.#deps.log.error(err, "Failed to emit leader election event", { message: what }),
    ).finally(() => this.#pending.delete(posted));
    this.#pending.add(posted);
    return posted;
  }

  /** Resolves once every post in flight has settled. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }
}
