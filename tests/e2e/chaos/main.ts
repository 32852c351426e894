/**
 * Chaos with real processes:
 *
 *     deno task chaos -- --cluster [--seed 1] [--minutes 2.5] [--attacher ours|go] [--keep]
 *
 * starts the end-to-end suite's cluster (etcd, kube-apiserver, the CSI mock driver; built by
 * `deno task e2e`), three attacher replicas with leader election (6 s lease, 4 s renew deadline,
 * 1 s retry period) and a stream of VolumeAttachment lifecycles (`workload.ts`), and for
 * `--minutes` runs the fault schedule drawn from `--seed` (`schedule.ts`): replicas stopped
 * (SIGSTOP) for 1-20 s, replicas killed (SIGKILL, started again 1 s after any exit, as a
 * Deployment would), a replica cut off from kube-apiserver (each replica reaches it through its
 * own fault proxy, `testkit/tcp_proxy.ts`: partitioned, reset, or its connections left
 * half-open), kube-apiserver answering late or restarted, etcd restarted, the driver restarted,
 * hanging or failing its calls, and the leader paused while the driver is still serving a
 * ControllerPublishVolume it sent. Then the faults stop, every
 * lifecycle gets up to {@link DRAIN_MS} to finish, and the checker (`checker.ts`) reads the
 * audit log (each replica runs as its own user, `replica_users.ts`, so it names the replica behind
 * every write), the replicas' and the driver's logs and the final state. It prints the schedule as
 * it ran, the figures, every violation and the command that replays the seed, and exits 1 when
 * our attacher broke a rule. `--attacher go` runs the Go csi-attacher v4.13.0 instead (each
 * replica in its own UTS namespace for its identity): it has no fencing, so its violations are
 * reported and the exit status is 0. `--keep` keeps the working directory.
 *
 * The schedule replays exactly; the real processes' timing does not, so a replay runs the same
 * faults at the same offsets, not the same interleaving.
 *
 * @module
 */

import {
  buildGoAttacher,
  DEFAULT_VERSION as GO_VERSION,
} from "../../../bench/build_go_attacher.ts";
import type { Lease } from "../../../lib/kube/types.ts";
import { TcpProxy } from "../../../testkit/tcp_proxy.ts";
import { Prng } from "../../chaos/prng.ts";
import { LocalCluster } from "../cluster.ts";
import { PUBLISH } from "../driver_log.ts";
import { finalizerFor, sleep } from "../kit.ts";
import { holderChanges, leaseWrites } from "../lease_terms.ts";
import { applyManifest } from "../manifests.ts";
import { PATHS } from "../objects.ts";
import { attributeCalls, loggedCalls } from "../replica_calls.ts";
import { LEASE_FLAGS, leaseName } from "../scenarios/leader_failover.ts";
import { ensureSettingsBinaries, resolveSettings } from "../settings.ts";
import {
  apiWrites,
  checkChaos,
  type NetworkHold,
  TERM_TOLERANCE_MS,
  vaWrites,
  type Violation,
  type WriteFigures,
} from "./checker.ts";
import { type ExitCause, type Replica, ReplicaSet } from "./replicas.ts";
import { groupBindings, replicaOfUser } from "./replica_users.ts";
import {
  countKinds,
  describeFault,
  drawSchedule,
  type Fault,
  FAULT_KINDS,
  REPLICA_KINDS,
} from "./schedule.ts";
import { Workload } from "./workload.ts";

const DRIVER_NAME = "io.kubernetes.storage.mock";
const NODES = ["chaos-node-1", "chaos-node-2", "chaos-node-3"];
const REPLICAS = ["chaos-0", "chaos-1", "chaos-2"];
/** After the fault phase, every lifecycle gets this long to reach its final state. */
export const DRAIN_MS = 90_000;
/** `pause-in-publish`: how long the driver serves arriving publishes late before the pause. */
const IN_PUBLISH_WINDOW_MS = 1_500;
/** A replica that exited starts again after this delay. */
const RESTART_DELAY_MS = 1_000;
/**
 * Client rate: a lifecycle costs about six API writes, so at the default QPS (5) a few hundred
 * would take longer than the run; 20 lets the stream keep the replicas busy.
 */
const QPS_FLAGS = ["--kube-api-qps=20", "--kube-api-burst=40"];

/** Parsed command line. */
export interface ClusterChaosArgs {
  seed: number;
  minutes: number;
  attacher: "ours" | "go";
  keep: boolean;
}

/** Parses the flags after `--cluster`. @throws {RangeError} for a bad or unknown flag. */
export function parseClusterArgs(argv: readonly string[]): ClusterChaosArgs {
  const args: ClusterChaosArgs = { seed: 1, minutes: 2.5, attacher: "ours", keep: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split("=", 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? "";
    switch (flag) {
      case "--":
      case "--cluster":
        break;
      case "--seed": {
        const v = Number(value());
        if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`Invalid --seed: ${v}`);
        args.seed = v;
        break;
      }
      case "--minutes": {
        const v = Number(value());
        if (!(v >= 0.25 && v <= 120)) throw new RangeError(`Invalid --minutes (0.25-120): ${v}`);
        args.minutes = v;
        break;
      }
      case "--attacher": {
        const v = value();
        if (v !== "ours" && v !== "go") throw new RangeError(`Invalid --attacher: ${v}`);
        args.attacher = v;
        break;
      }
      case "--keep":
        args.keep = true;
        break;
      default:
        throw new RangeError(`Unknown flag: ${flag}`);
    }
  }
  return args;
}

/** What happened to one fault of the schedule. */
interface FaultOutcome {
  fault: Fault;
  /** The replica it hit, for replica faults. */
  replica?: string;
  /** It hit the Lease holder. */
  leader?: boolean;
  skipped?: string;
  /** How long it took (restarts: until the server answered again). */
  tookMs?: number;
  /** When its replica's (or every replica's) bytes were held or delayed on their way. */
  holds?: NetworkHold[];
}

/** Runs the chaos; resolves with the exit status. */
export async function clusterChaosMain(argv: readonly string[]): Promise<number> {
  const args = parseClusterArgs(argv);
  const started = Date.now();
  const settings = await resolveSettings((name) => Deno.env.get(name));
  const log = (line: string) => console.log(line);
  const build = await ensureSettingsBinaries(settings, log);
  const entry = args.attacher === "go"
    ? await buildGoAttacher(GO_VERSION, settings.cacheDir, { go: settings.go, jobs: 2 })
    : undefined;
  const label = args.attacher === "go" ? `Go csi-attacher ${GO_VERSION}` : "ours";
  const phaseMs = Math.round(args.minutes * 60_000);
  const schedule = drawSchedule(args.seed, { phaseMs, replicas: REPLICAS.length });
  const replay = `deno task chaos -- --cluster --seed ${args.seed} --minutes ${args.minutes}` +
    (args.attacher === "go" ? " --attacher go" : "");
  log(
    `cluster chaos against ${label}: seed ${args.seed}, fault phase ${phaseMs / 1000} s, ` +
      `${schedule.length} faults (${formatCounts(countKinds(schedule))})`,
  );

  const dir = await Deno.makeTempDir({ prefix: "csi-attacher-chaos-" });
  const cluster = await LocalCluster.start({
    dir,
    binaries: build.binaries,
    driverName: DRIVER_NAME,
    rbacManifest: settings.rbacManifest.text,
    log,
    ownerPid: Deno.pid,
    // A driver that refuses a second call for a busy volume, as the CSI spec recommends: the only
    // way a publish still running when its caller's lease passed cannot land after the next
    // leader's unpublish (ARCHITECTURE.md, "A call still at the driver").
    driverArgs: ["--abort-busy-volumes"],
  });
  let failed = true;
  let replicas: ReplicaSet | undefined;
  const proxies = new Map<string, TcpProxy>();
  try {
    for (const node of NODES) await cluster.addNode(node);
    // Each replica its own user, so the audit log attributes every write (replica_users.ts).
    await applyManifest(cluster.admin, groupBindings(settings.rbacManifest.text));
    // Each replica its own way to kube-apiserver: a fault proxy for the network's faults.
    const apiPort = Number(new URL(cluster.info.server).port);
    const kubeconfigs = new Map<string, string>();
    for (const name of REPLICAS) {
      const proxy = await TcpProxy.start({ port: apiPort });
      proxies.set(name, proxy);
      kubeconfigs.set(
        name,
        await cluster.replicaKubeconfig(name, `https://127.0.0.1:${proxy.port}`),
      );
    }
    replicas = new ReplicaSet({
      cluster: cluster.info,
      names: REPLICAS,
      kubeconfigs,
      args: [...LEASE_FLAGS, ...QPS_FLAGS],
      entry,
      ownHostname: args.attacher === "go",
      ownerPid: Deno.pid,
      restartDelayMs: RESTART_DELAY_MS,
    });
    replicas.start();
    const prng = new Prng(args.seed).fork();
    const workload = new Workload({
      api: cluster.admin,
      driver: () => cluster.driver(),
      driverName: DRIVER_NAME,
      nodes: NODES,
      prefix: "chaos",
      prng,
      maxInFlight: 16,
      startEveryMs: 250,
    });
    const phaseStart = Date.now();
    const phaseEnd = phaseStart + phaseMs;
    const work = workload.run(phaseEnd, phaseEnd + DRAIN_MS);
    const outcomes = await runFaults(cluster, replicas, proxies, schedule, phaseStart);
    await work;
    const drainMs = Date.now() - phaseEnd;
    await replicas.stop();

    const finalVas = new Map(
      (await cluster.admin.getOk<
        { items: { metadata: { name: string }; status?: { attached?: boolean } }[] }
      >(
        PATHS.volumeAttachments,
      )).items.filter((va) => va.metadata.name.startsWith("chaos"))
        .map((va) => [va.metadata.name, va.status?.attached === true] as const),
    );
    const volumes = await cluster.driver().listVolumes();
    const finalPublished = new Set(
      volumes.filter((v) => v.volumeContext[`${DRIVER_NAME}/dev`] === "/dev/mock")
        .map((v) => v.volumeId),
    );
    const audit = await cluster.auditEvents();
    const writes = leaseWrites(audit, leaseName(DRIVER_NAME));
    const logged = (await Promise.all(
      replicas.replicas.map(async (r) => loggedCalls(r.name, await r.process.output())),
    )).flat();
    const calls = attributeCalls(await cluster.driverCalls(), logged);
    const { violations, figures } = checkChaos({
      leaseWrites: writes,
      calls,
      lifecycles: workload.lifecycles,
      vaWrites: vaWrites(audit),
      apiWrites: apiWrites(audit, replicaOfUser(REPLICAS)),
      networkHolds: outcomes.flatMap((o) => o.holds ?? []),
      finalVas,
      finalPublished,
      finalizer: finalizerFor(DRIVER_NAME),
    });

    log("schedule (as it ran):");
    for (const o of outcomes) log(`  ${describeOutcome(o)}`);
    const done = workload.lifecycles.filter((l) => l.goneAt !== undefined).length;
    const pauses = outcomes.filter((o) => o.fault.kind === "pause" && o.skipped === undefined);
    const applied = outcomes.filter((o) => o.skipped === undefined);
    log(`figures (${label}, seed ${args.seed}):`);
    log(
      `  fault phase ${(phaseMs / 1000).toFixed(0)} s, drain ${(drainMs / 1000).toFixed(1)} s, ` +
        `whole run ${((Date.now() - started) / 1000).toFixed(0)} s`,
    );
    log(
      `  faults applied: ${formatCounts(countKinds(applied.map((o) => o.fault)))}; ` +
        `skipped ${outcomes.length - applied.length}; pauses of the leader ` +
        `${pauses.filter((o) => o.leader).length}, paused ` +
        `${(pauses.reduce((s, o) => s + o.fault.durationMs, 0) / 1000).toFixed(1)} s in all`,
    );
    log(
      `  replica exits: ${formatExits(replicas.exits.map((e) => e.cause))}; ` +
        `restarts ${replicas.restarts}`,
    );
    log(`  Lease: ${writes.length} writes, ${holderChanges(writes).length} holder changes`);
    log(`  lifecycles: ${workload.lifecycles.length} started, ${done} reached their final state`);
    log(
      `  driver calls served: ${figures.publishes} ControllerPublishVolume, ` +
        `${figures.unpublishes} ControllerUnpublishVolume; by replica: ` +
        [...figures.byReplica].map(([r, n]) => `${r} ${n}`).join(", "),
    );
    if (figures.closestToEndMs !== undefined) {
      log(
        `  closest call inside a term: ${(figures.closestToEndMs / 1000).toFixed(2)} s ` +
          `before its lease could end (tolerance ${TERM_TOLERANCE_MS} ms)`,
      );
    }
    if (figures.outside.size > 0) {
      log(
        `  calls outside their term: ` +
          [...figures.outside].map(([r, o]) =>
            `${r} ${o.calls} (the latest ${(o.latestMs / 1000).toFixed(2)} s past its end)`
          ).join(", "),
      );
    }
    const inPublish = outcomes.filter((o) =>
      o.fault.kind === "pause-in-publish" && o.skipped === undefined
    ).length;
    log(
      `  driver calls that ended after their caller's term (received inside it; ` +
        `${inPublish} leader pauses during a slow publish): ${figures.lateCompletions.length}` +
        figures.lateCompletions.map((l) =>
          `\n    ${l.replica} ${l.method.slice(l.method.lastIndexOf("/") + 1)} of ${l.volumeId} ` +
          `ended ${(l.pastEndMs / 1000).toFixed(2)} s past the term; next: ${l.next ?? "none"}`
        ).join(""),
    );
    log(
      `  API writes (VolumeAttachments, their status, PersistentVolumes): ${
        formatWrites(figures.writes)
      }`,
    );
    log(`  violations: ${violations.length}${describeViolations(violations)}`);
    log(`replay: ${replay}`);
    failed = violations.length > 0 && args.attacher === "ours";
    if (violations.length > 0 && args.attacher === "go") {
      log(`(the Go csi-attacher has no fencing: its violations are reported, not failed)`);
    }
    return failed ? 1 : 0;
  } finally {
    await replicas?.stop();
    for (const proxy of proxies.values()) await proxy.close();
    await cluster.stop();
    if (failed || args.keep) log(`logs and state kept in ${dir}`);
    else await Deno.remove(dir, { recursive: true });
  }
}

/** Runs the schedule from `phaseStart`; resolves once every fault has ended. */
async function runFaults(
  cluster: LocalCluster,
  replicas: ReplicaSet,
  proxies: ReadonlyMap<string, TcpProxy>,
  schedule: readonly Fault[],
  phaseStart: number,
): Promise<FaultOutcome[]> {
  const leasePath = `${PATHS.leases("default")}/${leaseName(DRIVER_NAME)}`;
  let lastHolder = "";
  const holder = async () => {
    try {
      lastHolder = (await cluster.admin.find<Lease>(leasePath))?.spec.holderIdentity ?? "";
    } catch {
      // kube-apiserver restarting: the last holder seen.
    }
    return lastHolder;
  };
  const busy = new Set<string>();
  /** Runs `fn` unless a fault of the same `group` still runs. */
  const exclusive = async (group: string, out: FaultOutcome, fn: () => Promise<void>) => {
    if (busy.has(group)) return { ...out, skipped: `${group} already faulty` };
    busy.add(group);
    const t0 = Date.now();
    try {
      await fn();
    } finally {
      busy.delete(group);
    }
    return { ...out, tookMs: Date.now() - t0 };
  };
  const pause = async (replica: Replica, ms: number) => {
    replica.paused = true;
    replica.process.kill("SIGSTOP");
    await sleep(ms);
    replica.process.kill("SIGCONT");
    replica.paused = false;
  };
  const run = async (fault: Fault): Promise<FaultOutcome> => {
    const out: FaultOutcome = { fault };
    if (REPLICA_KINDS.has(fault.kind) || fault.kind === "pause-in-publish") {
      const leader = await holder();
      const replica: Replica | undefined = fault.target === undefined || fault.target === "leader"
        ? replicas.byIdentity(leader)
        : replicas.replicas[fault.target];
      if (replica === undefined) return { ...out, skipped: "no leader known" };
      out.replica = replica.name;
      out.leader = replica.name === leader;
      const proxy = proxies.get(replica.name)!;
      switch (fault.kind) {
        case "partition":
          return await exclusive(`the way of ${replica.name}`, out, async () => {
            const from = Date.now();
            proxy.hold();
            await sleep(fault.durationMs);
            proxy.release();
            out.holds = [{ replica: replica.name, from, until: Date.now() }];
          });
        case "reset":
          return await exclusive(`the way of ${replica.name}`, out, async () => {
            proxy.refuseNew(true);
            proxy.resetAll();
            await sleep(fault.durationMs);
            proxy.refuseNew(false);
          });
        case "half-open":
          proxy.silenceExisting();
          return out;
        default:
          break;
      }
      if (replica.process.exitStatus !== undefined) return { ...out, skipped: "not running" };
      if (fault.kind === "kill") {
        replica.process.kill("SIGKILL");
        return out;
      }
      if (replica.paused) return { ...out, skipped: "already paused" };
      if (fault.kind === "pause") {
        await pause(replica, fault.durationMs);
        return out;
      }
      // pause-in-publish: the driver serves the publishes arriving in the next 1.5 s late, then
      // the leader stops while they still run and stays stopped past its lease.
      return await exclusive("the driver", out, async () => {
        const slowUntil = Date.now() + IN_PUBLISH_WINDOW_MS;
        await cluster.setDriverFault({
          mode: "slow",
          delayMs: fault.delayMs,
          untilMs: slowUntil,
          methods: [PUBLISH],
        });
        await sleep(Math.max(0, slowUntil - Date.now()));
        await pause(replica, fault.durationMs);
      });
    }
    switch (fault.kind) {
      case "apiserver-restart":
        return await exclusive(
          "kube-apiserver",
          out,
          () => cluster.restartApiServer(fault.durationMs),
        );
      case "slow-apiserver":
        return await exclusive("the answers' pace", out, async () => {
          const from = Date.now();
          for (const p of proxies.values()) p.setDelay(fault.delayMs ?? 0);
          await sleep(fault.durationMs);
          for (const p of proxies.values()) p.setDelay(0);
          // What left before the delay ended may arrive that much later.
          const until = Date.now() + (fault.delayMs ?? 0);
          out.holds = [...proxies.keys()].map((replica) => ({ replica, from, until }));
        });
      case "etcd-restart":
        return await exclusive("etcd", out, () => cluster.restartEtcd(fault.durationMs));
      case "driver-restart":
        return await exclusive("the driver", out, async () => {
          await cluster.stopDriver();
          await sleep(fault.durationMs);
          await cluster.startDriver();
        });
      case "driver-hang":
      case "driver-fail":
        return await exclusive("the driver", out, async () => {
          const untilMs = Date.now() + fault.durationMs;
          await cluster.setDriverFault(
            fault.kind === "driver-hang"
              ? { mode: "hang", untilMs }
              : { mode: "fail", untilMs, code: fault.code },
          );
          await sleep(fault.durationMs);
        });
      default:
        throw new Error(`unhandled fault kind ${fault.kind}`);
    }
  };
  const running = schedule.map(async (fault) => {
    await sleep(Math.max(0, phaseStart + fault.at - Date.now()));
    return await run(fault);
  });
  return await Promise.all(running);
}

function formatCounts(counts: Record<string, number>): string {
  return FAULT_KINDS.map((k) => `${k} ${counts[k] ?? 0}`).join(", ");
}

function formatExits(causes: readonly ExitCause[]): string {
  const all: ExitCause[] = ["killed", "lost-lease", "lost-driver", "other"];
  return all.map((c) => `${c} ${causes.filter((x) => x === c).length}`).join(", ");
}

function formatWrites(writes: ReadonlyMap<string, WriteFigures>): string {
  let checked = 0;
  let outside = 0;
  let held = 0;
  for (const w of writes.values()) {
    checked += w.checked;
    outside += w.outside;
    held += w.heldByNetwork;
  }
  const each = [...writes].sort(([a], [b]) => a.localeCompare(b)).map(([r, w]) =>
    `${r} ${w.checked}` +
    (w.outside > 0
      ? ` (${w.outside} outside, the latest ${(w.latestMs / 1000).toFixed(2)} s)`
      : "") +
    (w.heldByNetwork > 0 ? ` (${w.heldByNetwork} held by the network)` : "")
  );
  return `${checked} checked, ${outside} outside their term, ${held} received after it while ` +
    `a partition or a slow server held them; by replica: ${each.join(", ")}`;
}

function describeOutcome(o: FaultOutcome): string {
  const who = o.replica === undefined ? "" : ` → ${o.replica}${o.leader ? " (leader)" : ""}`;
  const took = o.tookMs === undefined ? "" : `, back after ${(o.tookMs / 1000).toFixed(1)} s`;
  return `${describeFault(o.fault)}${who}${o.skipped ? `: skipped (${o.skipped})` : took}`;
}

function describeViolations(violations: readonly Violation[]): string {
  if (violations.length === 0) return "";
  const kinds = new Map<string, number>();
  for (const v of violations) kinds.set(v.kind, (kinds.get(v.kind) ?? 0) + 1);
  const lines = violations.slice(0, 30).map((v) => `\n    ${v.kind}: ${v.detail}`).join("");
  const more = violations.length > 30 ? `\n    … and ${violations.length - 30} more` : "";
  return ` (${[...kinds].map(([k, n]) => `${k} ${n}`).join(", ")})${lines}${more}`;
}

if (import.meta.main) Deno.exit(await clusterChaosMain(Deno.args));
