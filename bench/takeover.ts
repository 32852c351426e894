/**
 * `deno task bench -- --takeover --fake`: what a new leader costs after the old one died.
 *
 * One run, per attacher and N:
 * 1. replica A starts with `--leader-election`, takes the Lease and attaches the canary;
 * 2. replica B starts with `--leader-election` and waits (standby; a warm one lists and watches);
 *    all N VolumeAttachments are created and attached by A, the **attach phase**, where A's, B's
 *    and the servers' CPU seconds are measured (what a standby costs beside its leader);
 * 3. A is killed (SIGKILL to its process group) and at once one more VolumeAttachment, the
 *    probe, is created: the volume a Pod scheduled at that moment waits for;
 * 4. B takes the Lease (when A's has expired), lists (unless its caches are warm), and works
 *    through every VA.
 *
 * Measured for B, from its Lease acquisition (the API server's time of the holder change):
 * - **caches synced**: B's log says its VolumeAttachment and PersistentVolume caches synced
 *   ({@link cachesSyncedAt}: ours at V(0), the Go sidecar's reflectors at V(2), so B runs at
 *   `--v=2`, where neither logs anything per VA already attached); and, from the in-memory API
 *   server, when it had written both watch lists to their end (it writes them as they are read);
 * - **probe attached**: the probe VA's `status.attached` stored;
 * - **every VA processed**: B's CPU falls quiet ({@link QUIET_MS} below {@link QUIET_SHARE} of
 *   a core, after the probe is attached); the end of its last busy sample. Neither attacher says
 *   when its queues are empty, so the end of the work is read from the CPU it spends;
 * - B's CPU seconds from the kill to that point, and its peak RSS (VmHWM: B was idle before);
 * - ControllerPublishVolume calls for volumes other than the probe's: publishes of VAs already
 *   attached (must be 0), counted until B's first ListVolumes pass has run too; the probe's own
 *   are counted apart (a second one is a repeated publish of a VA attached during the takeover).
 *
 * Replicas get distinct leader-election identities through their host name: `HOSTNAME` (ours)
 * and `unshare --uts` with `hostname` (the Go sidecar takes `os.Hostname()`), so the standby does
 * not take the live leader's Lease as its own.
 *
 * @module
 */

import { attacherArgs, AttacherProcess } from "./attacher_process.ts";
import { parseBenchOptions } from "./bench_options.ts";
import type { BenchEnvironment } from "./environment.ts";
import { FakeEnvironment } from "./fake_environment.ts";
import { ProcReader } from "./proc_stats.ts";
import type { AttacherUnderTest, RssSeries } from "./run.ts";
import { defaultPhaseTimeoutMs, rssSampleMs } from "./run.ts";
import { type Panel, renderPicture } from "./picture.ts";
import { formatTable } from "./table.ts";
import { PROBE_PUBLISHES } from "./fixtures.ts";
import { shortName } from "./short_name.ts";
import { nowMs } from "./timeline.ts";
import { cachesSyncedAt } from "./caches_synced.ts";
import { queueDepths, queuesEmpty } from "./queue_depth.ts";
import type { EnvironmentFactory, WatchListSent } from "./environment.ts";

/** B counts as quiet below this share of one core... */
export const QUIET_SHARE = 0.1;
/** ...for this long. */
export const QUIET_MS = 3000;
/** CPU sampling interval of the standby, ms. */
const CPU_SAMPLE_MS = 250;
/** Longest wait for the standby's first ListVolumes pass after its Lease acquisition. */
const LIST_VOLUMES_WAIT_MS = 90_000;
const LEASE_FLAGS = ["--leader-election", "--leader-election-namespace=default"];
/** How often the standby's `/metrics` is read for its queue depths after the Lease, ms. */
const QUEUE_POLL_MS = 200;
/** The standby's `--v`: the Go sidecar's reflectors say "Caches populated" at V(2). */
const STANDBY_VERBOSITY = 2;
/** The watch lists an attacher waits for before it works. */
const WAITED_LISTS = ["volumeattachments", "persistentvolumes"];

/** One takeover run. Times are seconds; NaN where the run did not get that far. */
export interface TakeoverResult {
  attacher: string;
  count: number;
  ok: boolean;
  error?: string;
  /** Replica A: first create → all N attached. */
  leaderAttachSeconds: number;
  /** Kill of A → B holds the Lease. */
  killToLeaseSeconds: number;
  /** B holds the Lease → B's log says its VA and PV caches synced. */
  leaseToCachesSyncedSeconds: number;
  /** B holds the Lease → the API server wrote B's VA and PV watch lists to their end. */
  leaseToListsSentSeconds: number;
  /** B holds the Lease → the probe VA attached. */
  leaseToProbeAttachedSeconds: number;
  /**
   * B holds the Lease → B's VolumeAttachment and PersistentVolume queues are empty (their
   * `workqueue_depth` on B's `/metrics`, read every {@link QUEUE_POLL_MS} ms) once the probe is
   * attached: every VA handed to a worker.
   */
  leaseToQueuesEmptySeconds: number;
  /** B's queue depths from the Lease on: `[epoch ms, VA queue, PV queue]`. */
  depthSeries: [number, number, number][];
  /** B holds the Lease → B's CPU falls quiet (every VA processed, the driver's lists too). */
  leaseToProcessedSeconds: number;
  /** B's CPU seconds from the kill of A to the end of its work. */
  cpuSeconds: number;
  /**
   * CPU seconds kube-apiserver and etcd (the environment's `apiServer` and `etcd` processes)
   * spent over the same span: what serving B's takeover cost the control plane.
   */
  serverCpuSeconds: number;
  /** B's CPU seconds from its start to the kill: a standby's (a warm one lists and watches). */
  standbyCpuSeconds: number;
  /**
   * A attaching all N with B as its standby: the CPU seconds of A, of B, and of kube-apiserver
   * and etcd over that phase (what a standby costs itself and the servers).
   */
  attachPhase: { leaderCpuSeconds: number; standbyCpuSeconds: number; serverCpuSeconds: number };
  /** B's RSS before the kill (standby), and its peak (VmHWM) at the end. */
  standbyRssBytes: number;
  peakRssBytes: number;
  /** CSI calls B made from the kill to the end, by method. */
  csiCalls: Record<string, number>;
  /** ControllerPublishVolume calls other than the probe's one. */
  publishesOfAttached: number;
  /** B's RSS over the takeover, and the Lease acquisition, for pictures. */
  rssSeries: RssSeries;
  /** B's CPU samples from the kill: `[epoch ms, CPU seconds]`. */
  cpuSeries: [number, number][];
  leaseAt: number;
  killedAt: number;
}

/**
 * How long the leader may take to attach all `count` VolumeAttachments before the kill: the
 * phase's bound, or 20 ms per VolumeAttachment (50 attaches/s) when that is longer.
 */
export function setUpTimeoutMs(count: number, phaseTimeoutMs: number): number {
  return Math.max(phaseTimeoutMs, count * 20);
}

/** The shell command line of replica `identity`: its own host name, as both attachers read it. */
export function replicaCommand(commandLine: string, identity: string): string {
  return `env HOSTNAME=${identity} unshare --uts -- sh -c 'hostname ${identity} && exec "$@"' sh ${commandLine}`;
}

/**
 * The end of the work in CPU samples `[at ms, cpu s]` taken from `from` on: the time of the last
 * sample whose interval used at least `share` of a core, once `quietMs` without one followed and
 * `quietFrom` had passed (quiet before it does not end the work); undefined while that has not
 * come.
 */
export function workEnd(
  samples: readonly [number, number][],
  from: number,
  quietFrom = from,
  share = QUIET_SHARE,
  quietMs = QUIET_MS,
): number | undefined {
  let lastBusy = from;
  for (let i = 1; i < samples.length; i++) {
    const [t0, c0] = samples[i - 1]!;
    const [t1, c1] = samples[i]!;
    if (t1 <= from) continue;
    if ((c1 - c0) / ((t1 - t0) / 1000) >= share) lastBusy = t1;
    else if (t1 - Math.max(lastBusy, quietFrom) >= quietMs) return lastBusy;
  }
  return undefined;
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/**
 * Reads the queue depths at `url` every {@link QUEUE_POLL_MS} ms into `into` (`[at, VA, PV]`,
 * -1 for a queue not exported) until stopped; a failed read is skipped.
 */
function pollQueueDepths(
  url: string,
  into: [number, number, number][],
): { stop: () => void; done: Promise<void> } {
  const stopping = new AbortController();
  const done = (async () => {
    while (!stopping.signal.aborted) {
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
        const d = queueDepths(await res.text());
        into.push([nowMs(), d["csi-attacher-va"] ?? -1, d["csi-attacher-pv"] ?? -1]);
      } catch {
        // not listening yet, or too slow: the next read
      }
      await sleep(QUEUE_POLL_MS);
    }
  })();
  return { stop: () => stopping.abort(), done };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function addCounts(into: Record<string, number>, more: Record<string, number>): void {
  for (const [k, v] of Object.entries(more)) into[k] = (into[k] ?? 0) + v;
}

/** Runs one takeover; never throws for run failures. */
export async function runTakeover(
  deps: { environment: (count: number) => Promise<BenchEnvironment>; proc: ProcReader },
  attacher: AttacherUnderTest,
  options: { count: number; workers: number; logDir: string; progress: (l: string) => void },
): Promise<TakeoverResult> {
  const result: TakeoverResult = {
    attacher: attacher.label,
    count: options.count,
    ok: false,
    leaderAttachSeconds: NaN,
    killToLeaseSeconds: NaN,
    leaseToCachesSyncedSeconds: NaN,
    leaseToListsSentSeconds: NaN,
    leaseToProbeAttachedSeconds: NaN,
    leaseToQueuesEmptySeconds: NaN,
    depthSeries: [],
    leaseToProcessedSeconds: NaN,
    cpuSeconds: NaN,
    serverCpuSeconds: NaN,
    standbyCpuSeconds: NaN,
    attachPhase: { leaderCpuSeconds: NaN, standbyCpuSeconds: NaN, serverCpuSeconds: NaN },
    standbyRssBytes: NaN,
    peakRssBytes: NaN,
    csiCalls: {},
    publishesOfAttached: NaN,
    rssSeries: { at: [], bytes: [] },
    cpuSeries: [],
    leaseAt: NaN,
    killedAt: NaN,
  };
  const timeoutMs = defaultPhaseTimeoutMs({
    name: "",
    count: options.count,
    nodes: 1,
    qps: 10_000,
    burst: 10_000,
    workers: options.workers,
  });
  let env: BenchEnvironment;
  try {
    env = await deps.environment(options.count);
  } catch (err) {
    result.error = `the environment did not start: ${String(err)}`;
    return result;
  }
  const metricsPort = freePort();
  const argsAt = (verbosity: number) => [
    ...attacherArgs({
      kubeconfig: env.kubeconfigPath,
      csiAddress: env.csiAddress,
      workerThreads: options.workers,
      kubeApiQps: 10_000,
      kubeApiBurst: 10_000,
      verbosity,
    }),
    ...LEASE_FLAGS,
  ];
  const name = attacher.label.replace(/[^A-Za-z0-9.-]+/g, "_");
  const logOf = (replica: string) =>
    `${options.logDir}/takeover-N${options.count}-${name}-${replica}.log`;
  let leader: AttacherProcess | undefined;
  let standby: AttacherProcess | undefined;
  let sampler: ReturnType<typeof setInterval> | undefined;
  let depths: ReturnType<typeof pollQueueDepths> | undefined;
  try {
    const leaseHolders = env.leaseHolders?.bind(env);
    if (leaseHolders === undefined) throw new Error("the environment does not record Leases");
    const waitFor = async (what: string, check: () => Promise<boolean>, limitMs = timeoutMs) => {
      const deadline = Date.now() + limitMs;
      while (!(await check())) {
        if (leader?.exited !== undefined && Number.isNaN(result.killedAt)) {
          throw new Error(`replica A exited waiting for ${what}`);
        }
        if (standby?.exited !== undefined) throw new Error(`replica B exited waiting for ${what}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await sleep(100);
      }
    };
    await Deno.writeTextFile(logOf("a"), `# ${attacher.commandLine}\n`);
    await Deno.writeTextFile(logOf("b"), `# ${attacher.commandLine}\n`);
    await env.createCanary();
    leader = AttacherProcess.start(
      replicaCommand(attacher.commandLine, "replica-a"),
      argsAt(1),
      logOf("a"),
    );
    await waitFor("the canary", async () => (await env.wait("canary", 1000)).done);
    // B is up while A works, as a standby is: a warm one watches A's attaches.
    standby = AttacherProcess.start(
      replicaCommand(attacher.commandLine, "replica-b"),
      [...argsAt(STANDBY_VERBOSITY), `--http-endpoint=127.0.0.1:${metricsPort}`],
      logOf("b"),
    );
    const b = standby;
    await sleep(5000);
    const holders = await leaseHolders();
    if (holders.at(-1)?.holder !== "replica-a") {
      throw new Error(`replica A does not hold the Lease: ${JSON.stringify(holders)}`);
    }
    const servers = Object.entries(env.helperPids())
      .filter(([role]) => role === "apiServer" || role === "etcd")
      .map(([, pid]) => pid);
    const serversCpu = () =>
      servers.length === 0
        ? NaN
        : servers.reduce((sum, pid) => sum + (deps.proc.sample(pid)?.cpuSeconds ?? NaN), 0);
    const cpuOf = (pid: number) => deps.proc.sampleTree(pid)?.cpuSeconds ?? NaN;
    const phaseStart = { a: cpuOf(leader.pid), b: cpuOf(b.pid), servers: serversCpu() };
    await env.startAttach();
    // Replica A's first attach of all N is the set-up, not a measured phase: on a real API server
    // (about 180 attaches/s on 2 cores) 20 000 take longer than a phase's bound.
    await waitFor(
      "all attached",
      async () => (await env.wait("attached", 1000)).done,
      setUpTimeoutMs(options.count, timeoutMs),
    );
    result.attachPhase = {
      leaderCpuSeconds: cpuOf(leader.pid) - phaseStart.a,
      standbyCpuSeconds: cpuOf(b.pid) - phaseStart.b,
      serverCpuSeconds: serversCpu() - phaseStart.servers,
    };
    const t = await env.timeline();
    result.leaderAttachSeconds = (t.lastAttachedAt - t.attachStartedAt) / 1000;
    options.progress(
      `  replica A attached ${options.count} in ${result.leaderAttachSeconds.toFixed(1)} s`,
    );
    // The standby's watch events of the last attaches, and the leader's idle collection.
    await sleep(2000);
    const before = deps.proc.sampleTree(b.pid);
    if (before === undefined) throw new Error("replica B exited as a standby");
    result.standbyRssBytes = before.rssBytes;
    await env.takeCsiCalls();

    // The kill, and at once the probe.
    const cpu = result.cpuSeries;
    /** The servers' CPU seconds, one entry per entry of `cpu`. */
    const serverCpu: number[] = [];
    const sample = () => {
      const s = deps.proc.sampleTree(b.pid);
      if (s === undefined) return;
      const at = nowMs();
      cpu.push([at, s.cpuSeconds]);
      serverCpu.push(serversCpu());
      if (cpu.length % Math.max(1, Math.round(rssSampleMs(options.count) / CPU_SAMPLE_MS)) === 0) {
        result.rssSeries.at.push(at);
        result.rssSeries.bytes.push(s.rssBytes);
      }
    };
    sample();
    result.standbyCpuSeconds = cpu[0]?.[1] ?? NaN;
    result.killedAt = nowMs();
    Deno.kill(-leader.pid, "SIGKILL");
    await env.createFloodProbe();
    sampler = setInterval(sample, CPU_SAMPLE_MS);
    await waitFor("replica B to take the Lease", async () => {
      const h = (await leaseHolders()).at(-1);
      if (h?.holder !== "replica-b") return false;
      result.leaseAt = h.at;
      return true;
    });
    result.killToLeaseSeconds = (result.leaseAt - result.killedAt) / 1000;
    options.progress(
      `  replica B holds the Lease ${result.killToLeaseSeconds.toFixed(1)} s after the kill`,
    );
    depths = pollQueueDepths(`http://127.0.0.1:${metricsPort}/metrics`, result.depthSeries);
    await waitFor("the probe", async () => (await env.wait("flood", 1000)).done);
    const probe = await env.timeline();
    result.leaseToProbeAttachedSeconds = (probe.floodAttachedAt - result.leaseAt) / 1000;
    // B may wait on its lists without spending CPU before it works: quiet counts only once the
    // probe, near the end of the initial list, is attached.
    let end: number | undefined;
    await waitFor("replica B's CPU to fall quiet", () => {
      end = workEnd(cpu, result.leaseAt, probe.floodAttachedAt);
      return Promise.resolve(end !== undefined);
    });
    result.leaseToProcessedSeconds = (end! - result.leaseAt) / 1000;
    depths.stop();
    await depths.done;
    const empty = result.depthSeries.find(([at, va, pv]) =>
      at >= probe.floodAttachedAt && queuesEmpty({ "csi-attacher-va": va, "csi-attacher-pv": pv })
    );
    result.leaseToQueuesEmptySeconds = ((empty?.[0] ?? NaN) - result.leaseAt) / 1000;
    const endIndex = cpu.findIndex(([at]) => at >= end!);
    const endAt = endIndex < 0 ? cpu.length - 1 : endIndex;
    result.cpuSeconds = cpu[endAt]![1] - cpu[0]![1];
    result.serverCpuSeconds = serverCpu[endAt]! - serverCpu[0]!; // NaN without servers
    // The first ListVolumes pass is part of the takeover too: its publishes count.
    const calls: Record<string, number> = {};
    await waitFor("replica B's first ListVolumes", async () => {
      addCounts(calls, await env.takeCsiCalls());
      return (calls.ListVolumes ?? 0) > 0;
    }, LIST_VOLUMES_WAIT_MS).catch((err) => {
      options.progress(`  ${err instanceof Error ? err.message : String(err)}`);
    });
    await sleep(QUIET_MS);
    addCounts(calls, await env.takeCsiCalls());
    result.csiCalls = calls;
    result.publishesOfAttached = (calls.ControllerPublishVolume ?? 0) -
      (calls[PROBE_PUBLISHES] ?? 0);
    const synced = cachesSyncedAt((await Deno.readTextFile(logOf("b"))).split("\n"), {
      year: new Date(result.killedAt).getFullYear(),
      fromMs: result.killedAt,
    });
    result.leaseToCachesSyncedSeconds = ((synced ?? NaN) - result.leaseAt) / 1000;
    const sent = await env.watchListsSent?.();
    if (sent !== undefined) {
      result.leaseToListsSentSeconds = (listsSentAt(sent, result.killedAt) - result.leaseAt) / 1000;
    }
    const last = deps.proc.sampleTree(b.pid);
    result.peakRssBytes = last?.peakRssBytes ?? NaN;
    result.ok = true;
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err);
  } finally {
    clearInterval(sampler);
    depths?.stop();
    await depths?.done;
    if (standby !== undefined) await standby.stop();
    if (leader !== undefined) await leader.stop();
    await env.close();
  }
  return result;
}

/** `--takeover`: the runs and the table. */
export async function runTakeoverMode(
  args: string[],
  outDir: string,
  ourCommand: () => Promise<string>,
): Promise<number> {
  const options = parseBenchOptions(args.filter((a) => a !== "--takeover"), outDir);
  let environment: EnvironmentFactory = (p) =>
    FakeEnvironment.start({ ...p, driver: "example.csi.k8s.io" });
  let environmentName = "--fake";
  if (!options.fake) {
    const { openClusterEnvironment } = await import("./cluster_environment.ts");
    const cluster = await openClusterEnvironment({
      log: (l) => console.error(l),
      env: (name) => Deno.env.get(name),
    });
    if (cluster === undefined) {
      console.error("The e2e cluster is not available; run with --fake.");
      return 1;
    }
    environment = cluster.factory;
    environmentName = "e2e cluster";
  }
  const commands = options.attacherCommands.length > 0
    ? options.attacherCommands
    : [await ourCommand()];
  const attachers = commands.map((commandLine, i) => ({
    label: `${String.fromCharCode(65 + i)}: ${shortName(commandLine)}`,
    commandLine,
  }));
  const started = new Date();
  const stamp = started.toISOString().replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
  const logDir = `${options.outDir}/logs-${stamp}`;
  await Deno.mkdir(logDir, { recursive: true });
  const proc = await ProcReader.create();
  const results: TakeoverResult[] = [];
  let n = 0;
  for (const count of options.sizes) {
    for (let run = 1; run <= options.runs; run++) {
      for (const attacher of attachers) {
        console.error(`[takeover N=${count}] run ${run}/${options.runs} ${attacher.label}`);
        const prefix = `t${stamp.slice(11, 19).replace(/-/g, "")}r${n++}-`;
        const r = await runTakeover(
          {
            environment: (c) =>
              environment({ count: c, nodes: options.nodes, prefix, takeover: true }),
            proc,
          },
          attacher,
          { count, workers: options.workers, logDir, progress: (l) => console.error(l) },
        );
        console.error(r.ok ? `  ${JSON.stringify(summary(r))}` : `  FAILED: ${r.error}`);
        results.push(r);
      }
    }
  }
  const rows = results.map((r) => [
    r.attacher,
    String(r.count),
    r.ok ? "ok" : "FAILED",
    ...Object.values(summary(r)).map((v) => (Number.isFinite(v) ? String(v) : "–")),
  ]);
  console.log(formatTable(
    ["attacher", "N", "run", ...Object.keys(summary(results[0]!))],
    rows,
  ));
  const panels = takeoverPanels(results, attachers.map((a) => a.label));
  const svg = `${options.outDir}/${stamp}-takeover.svg`;
  await Deno.writeTextFile(
    svg,
    renderPicture(
      `Takeover: the standby's RSS around its Lease acquisition (${environmentName}, ${options.nodes} nodes), ${
        started.toISOString().slice(0, 10)
      }`,
      Math.max(...options.sizes),
      panels,
      attachers.map((a) => a.label),
      `seconds from ${PANEL_LEAD_MS / 1000} s before the standby took the Lease`,
    ),
  );
  console.error(`Wrote ${svg}`);
  const file = `${options.outDir}/${stamp}-takeover.json`;
  await Deno.writeTextFile(
    file,
    JSON.stringify(
      {
        startedAt: started.toISOString(),
        loadAverage: Deno.loadavg(),
        options,
        attachers,
        results,
      },
      (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v),
      2,
    ) + "\n",
  );
  console.error(`Wrote ${file}`);
  return results.every((r) => r.ok) ? 0 : 1;
}

/**
 * When the last of the watch lists an attacher waits for was written to its end, counting the
 * first of each at or after `fromMs`; NaN when one is missing.
 */
export function listsSentAt(sent: readonly WatchListSent[], fromMs: number): number {
  let last = -Infinity;
  for (const resource of WAITED_LISTS) {
    const first = sent.find((s) => s.resource === resource && s.at >= fromMs);
    if (first === undefined) return NaN;
    last = Math.max(last, first.at);
  }
  return last;
}

/** How much of the Lease wait a takeover panel shows, ms (the wait itself is the Lease's). */
export const PANEL_LEAD_MS = 2000;
/** How long after the end of the work a takeover panel goes on, ms. */
const PANEL_TAIL_MS = 3000;

/**
 * One picture panel per takeover run: the standby's RSS from {@link PANEL_LEAD_MS} before its
 * Lease acquisition to {@link PANEL_TAIL_MS} after its CPU fell quiet, the phases shaded.
 */
export function takeoverPanels(results: TakeoverResult[], labels: string[]): Panel[] {
  return results.map((r) => {
    const origin = r.leaseAt - PANEL_LEAD_MS;
    const last = r.leaseAt + r.leaseToProcessedSeconds * 1000 + PANEL_TAIL_MS;
    const keep = r.rssSeries.at.map((at) => at >= origin && !(at > last));
    return panelOf(r, labels, origin, {
      at: r.rssSeries.at.filter((_, i) => keep[i]),
      bytes: r.rssSeries.bytes.filter((_, i) => keep[i]),
    });
  });
}

function panelOf(r: TakeoverResult, labels: string[], origin: number, rss: RssSeries): Panel {
  return {
    title: `${r.attacher}, N=${r.count}: ${
      r.ok
        ? `caches synced ${r.leaseToCachesSyncedSeconds.toFixed(2)} s, probe attached ${
          r.leaseToProbeAttachedSeconds.toFixed(2)
        } s, queues empty ${r.leaseToQueuesEmptySeconds.toFixed(2)} s, CPU quiet ${
          r.leaseToProcessedSeconds.toFixed(1)
        } s after the Lease; ${r.cpuSeconds.toFixed(2)} CPU s, peak ${
          (r.peakRssBytes / 2 ** 20).toFixed(0)
        } MiB`
        : `FAILED (${(r.error ?? "").split("\n")[0]})`
    }`,
    attacherIndex: Math.max(0, labels.indexOf(r.attacher)),
    originAt: origin,
    phases: [
      { name: "lease wait", from: origin, to: r.leaseAt },
      ...(Number.isFinite(r.leaseToCachesSyncedSeconds)
        ? [{
          name: "caches syncing",
          from: r.leaseAt,
          to: r.leaseAt + r.leaseToCachesSyncedSeconds * 1000,
        }, {
          name: "takeover",
          from: r.leaseAt + r.leaseToCachesSyncedSeconds * 1000,
          to: r.leaseAt + r.leaseToProcessedSeconds * 1000,
        }]
        : [{
          name: "takeover",
          from: r.leaseAt,
          to: r.leaseAt + r.leaseToProcessedSeconds * 1000,
        }]),
    ],
    rss,
    attached: { startAt: NaN, stepMs: 0, counts: [] },
  };
}

/** The figures of a run for the table, rounded. */
export function summary(r: TakeoverResult): Record<string, number> {
  const round = (v: number, d: number) => Number(v.toFixed(d));
  return {
    "kill → Lease (s)": round(r.killToLeaseSeconds, 1),
    "Lease → caches synced (s)": round(r.leaseToCachesSyncedSeconds, 2),
    "Lease → lists sent (s)": round(r.leaseToListsSentSeconds, 2),
    "Lease → probe attached (s)": round(r.leaseToProbeAttachedSeconds, 2),
    "Lease → queues empty (s)": round(r.leaseToQueuesEmptySeconds, 2),
    "Lease → CPU quiet (s)": round(r.leaseToProcessedSeconds, 1),
    "CPU s": round(r.cpuSeconds, 2),
    "API server + etcd CPU s": round(r.serverCpuSeconds, 2),
    "attach phase: A CPU s": round(r.attachPhase.leaderCpuSeconds, 2),
    "attach phase: standby CPU s": round(r.attachPhase.standbyCpuSeconds, 2),
    "attach phase: API server + etcd CPU s": round(r.attachPhase.serverCpuSeconds, 2),
    "standby CPU s": round(r.standbyCpuSeconds, 2),
    "standby RSS (MiB)": round(r.standbyRssBytes / 2 ** 20, 1),
    "peak RSS (MiB)": round(r.peakRssBytes / 2 ** 20, 1),
    "publishes of attached VAs": r.publishesOfAttached,
    "ListVolumes calls": r.csiCalls.ListVolumes ?? 0,
  };
}
