/**
 * The attacher replicas of a cluster chaos run, kept running as a Deployment's would be: a
 * replica that exits (killed, lost its lease, lost its driver) is started again after a fixed
 * delay, under the same name and so the same leader-election identity.
 *
 * @module
 */

import { startAttacher } from "../attacher_process.ts";
import type { ClusterInfo } from "../cluster.ts";
import { sleep } from "../kit.ts";
import type { ManagedProcess } from "../process.ts";

/** Why a replica exited, from its exit status and its last lines. */
export type ExitCause = "killed" | "lost-lease" | "lost-driver" | "other";

/** One exit of a replica. */
export interface ReplicaExit {
  replica: string;
  at: number;
  cause: ExitCause;
  status: string;
}

/** One supervised replica. */
export interface Replica {
  /** Its name, which is also its leader-election identity. */
  name: string;
  process: ManagedProcess;
  /** True between SIGSTOP and SIGCONT. */
  paused: boolean;
}

/** How the replicas run. */
export interface ReplicaSetOptions {
  cluster: ClusterInfo;
  names: readonly string[];
  /** `--kubeconfig` of each replica by name (its own user); default the attacher user's. */
  kubeconfigs?: ReadonlyMap<string, string>;
  /** Extra flags of every replica. */
  args: readonly string[];
  /** The program (default our main.ts). */
  entry?: string;
  /** Each in its own UTS namespace (the Go csi-attacher's identity is its host name). */
  ownHostname?: boolean;
  ownerPid: number;
  /** Delay before a replica that exited starts again. */
  restartDelayMs: number;
}

/** Classifies an exit from its status and the replica's last log lines. */
export function exitCause(status: Deno.CommandStatus, tail: string): ExitCause {
  if (status.signal === "SIGKILL") return "killed";
  if (/stopped leading|leaderelection lost/i.test(tail)) return "lost-lease";
  if (/Lost connection to CSI driver/i.test(tail)) return "lost-driver";
  return "other";
}

/** Starts, supervises and stops the replicas. */
export class ReplicaSet {
  readonly replicas: Replica[] = [];
  readonly exits: ReplicaExit[] = [];
  readonly #options: ReplicaSetOptions;
  readonly #loops: Promise<void>[] = [];
  #stopping = false;
  restarts = 0;

  constructor(options: ReplicaSetOptions) {
    this.#options = options;
  }

  /** Starts every replica and restarts each one after it exits, until {@link stop}. */
  start(): void {
    for (const name of this.#options.names) {
      const process = startAttacher(this.#options.cluster, {
        name,
        args: [...this.#options.args],
        kubeconfig: this.#options.kubeconfigs?.get(name),
        entry: this.#options.entry,
        ownHostname: this.#options.ownHostname,
        ownerPid: this.#options.ownerPid,
      });
      const replica: Replica = { name, process, paused: false };
      this.replicas.push(replica);
      this.#loops.push(this.#supervise(replica));
    }
  }

  /** The replica of a leader-election identity. */
  byIdentity(identity: string): Replica | undefined {
    return this.replicas.find((r) => r.name === identity);
  }

  async #supervise(replica: Replica): Promise<void> {
    for (;;) {
      const status = await replica.process.status;
      if (this.#stopping) return;
      const tail = await replica.process.tail(15);
      this.exits.push({
        replica: replica.name,
        at: Date.now(),
        cause: exitCause(status, tail),
        status: status.signal !== null ? `signal ${status.signal}` : `status ${status.code}`,
      });
      await sleep(this.#options.restartDelayMs);
      if (this.#stopping) return;
      this.restarts++;
      await replica.process.restart();
    }
  }

  /** Stops supervising, resumes what is paused, stops every replica (SIGTERM, then SIGKILL). */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const r of this.replicas) r.process.kill("SIGCONT");
    await Promise.all(this.replicas.map((r) => r.process.stop(20_000)));
    await Promise.all(this.#loops);
  }
}
