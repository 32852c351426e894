/**
 * One benchmark run: one attacher, one scenario, a fresh environment.
 *
 * Phases:
 * 1. **startup**: the canary VolumeAttachment exists, the attacher starts; ends when the canary is
 *    attached (start → first attach: process start, driver connection, informer list and watch,
 *    one attach).
 * 2. **attach**: all N VolumeAttachments are created at once; ends when every one is attached,
 *    plus a quiet period (no API request for {@link RunOptions.quietMs}) so that trailing requests
 *    are counted too.
 * 3. **rest**: nothing happens for {@link RunOptions.restMs}; RSS is read at its end (all volumes
 *    attached and cached).
 * 4. **detach**: all N are deleted at once; ends when every one is gone, plus a quiet period.
 *    In the detach flood ({@link Scenario.unpublishDelayMs}) one more VolumeAttachment is created
 *    right after the deletes, and the time until it is attached is
 *    {@link RunResult.floodAttachLatencySeconds}: what a Pod rescheduled during a node drain
 *    waits.
 *
 * API requests and CSI calls are taken from the server's and the driver's records at the end of
 * each phase; CPU from `/proc` at the same points.
 *
 * @module
 */

import { attacherArgs, type AttacherFlags, AttacherProcess } from "./attacher_process.ts";
import type { BenchEnvironment, EnvironmentFactory } from "./environment.ts";
import { mergeCounts, type RequestCounts } from "./request_counts.ts";
import { nowMs, type TimelineReport, type WaitTarget } from "./timeline.ts";
import type { ContextSwitches, ProcReader, TreeSample } from "./proc_stats.ts";
import type { LatencySummary } from "./stats.ts";

/** A benchmark scenario: how many VolumeAttachments and with which client limits. */
export interface Scenario {
  /** e.g. `N=100 qps=5 burst=10`. */
  name: string;
  count: number;
  nodes: number;
  qps: number;
  burst: number;
  workers: number;
  /**
   * Detach flood: every ControllerUnpublishVolume takes this long (ms), and a new VA is created
   * during the detaches (https://github.com/kubernetes-csi/external-attacher/issues/761).
   */
  unpublishDelayMs?: number;
  /**
   * Pods make the VolumeAttachments (kube-controller-manager's attach/detach controller): the
   * run creates and deletes N Pods instead, and {@link RunResult.pods} has what users wait for.
   */
  pods?: boolean;
}

/** The attacher under test. */
export interface AttacherUnderTest {
  /** Short label for the table (`A`, `B` and a name). */
  label: string;
  /** Shell command line; the benchmark's flags are appended. */
  commandLine: string;
}

/** Timing knobs of a run. */
export interface RunOptions {
  /** Quiet period that ends the attach and detach phases. */
  quietMs: number;
  /** Longest wait for trailing requests after the last object changed. */
  quietMaxMs: number;
  /** Length of the rest phase. */
  restMs: number;
  /** Limit of one phase; derived from the scenario when undefined. */
  phaseTimeoutMs?: number;
  /** Directory for the attacher's log. */
  logDir: string;
  /** Prefix of the objects' names. */
  prefix: string;
}

/** Requests, CSI calls and CPU of one phase. */
export interface PhaseFigures {
  requests: RequestCounts;
  csiCalls: Record<string, number>;
  /** Attacher CPU seconds spent in the phase. */
  cpuSeconds: number;
  /** CPU seconds of the environment's own processes in the phase, by role. */
  helperCpuSeconds: Record<string, number>;
  /**
   * The attacher's context switches in the phase, all threads (`proc_stats.ts`): voluntary ones
   * are the times it was woken. Absent in results written before they were counted.
   */
  switches?: ContextSwitches;
}

/** `--pods` figures of one run, seconds. */
export interface PodFigures {
  /** Pod created → its volume in its Node's `status.volumesAttached`. */
  attachLatency: LatencySummary;
  /** First Pod created → last volume listed. */
  allAttachedSeconds: number;
  /** Pod deleted → its volume gone from the Node's list. */
  detachLatency: LatencySummary;
  /** First Pod deleted → last volume gone from the lists. */
  allDetachedSeconds: number;
}

/** Everything measured in one run. Times are seconds; NaN where the run did not get that far. */
export interface RunResult {
  attacher: string;
  scenario: string;
  run: number;
  ok: boolean;
  error?: string;
  /** Spawn → canary attached. */
  startupSeconds: number;
  /** First create → last attached. */
  attachSeconds: number;
  attachesPerSecond: number;
  /**
   * Attaches a second from the tenth to the ninetieth percent attached: the attacher's pace
   * without the burst's creation, which every attacher waits for alike.
   */
  steadyAttachesPerSecond: number;
  /** First delete → last gone. */
  detachSeconds: number;
  detachesPerSecond: number;
  /** create → attached, seconds. */
  attachLatency: LatencySummary;
  /** delete → gone, seconds. */
  detachLatency: LatencySummary;
  /** Detach flood: the new VA's create → attached, seconds; NaN in other scenarios. */
  floodAttachLatencySeconds: number;
  phases: Partial<Record<PhaseName, PhaseFigures>>;
  /** Attacher CPU from spawn to the end of the detach phase. */
  cpuSecondsTotal: number;
  /** VmHWM at the end of the run. */
  peakRssBytes: number;
  /** VmRSS at the end of the rest phase (N volumes attached and cached). */
  restRssBytes: number;
  /** VmRSS right after start (canary attached). */
  startupRssBytes: number;
  timeline?: TimelineReport;
  /** `--pods` only. */
  pods?: PodFigures;
  /** The attacher's RSS sampled over the run, for the pictures. */
  rssSeries: RssSeries;
  /** Start and end of each phase as the benchmark saw them, epoch ms. */
  phaseTimes: Partial<Record<PhaseName, [number, number]>>;
}

/** The phases of a run, in order. */
export type PhaseName = "startup" | "attach" | "rest" | "detach";

/** RSS samples: `bytes[i]` at `at[i]` (epoch ms). */
export interface RssSeries {
  at: number[];
  bytes: number[];
}

/** Interval of the RSS samples: 250 ms, longer for large N (about 2000 samples in a run). */
export function rssSampleMs(count: number): number {
  return Math.min(1000, Math.max(250, Math.ceil(count / 100)));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function emptyLatency(): LatencySummary {
  return { count: 0, mean: NaN, p50: NaN, p90: NaN, p95: NaN, p99: NaN, max: NaN };
}

function toSeconds(s: LatencySummary): LatencySummary {
  return {
    count: s.count,
    mean: s.mean / 1000,
    p50: s.p50 / 1000,
    p90: s.p90 / 1000,
    p95: s.p95 / 1000,
    p99: s.p99 / 1000,
    max: s.max / 1000,
  };
}

/**
 * A phase may take this long per object at least (a pace of 50 a second), ms. On the end-to-end
 * cluster kube-apiserver sets the pace: 115 to 190 attaches a second for both attachers on a
 * slow day, when 5 ms (200 a second) cut the Go attacher's N=20 000 attach phase short at 120 s
 * with 18 307 attached.
 */
export const PHASE_MS_PER_OBJECT = 20;

/**
 * The limit of one phase: generous for the request budget the client limits allow, and for N
 * objects at a pace of 50 a second (both attachers do 450 to 1300 a second on the in-memory
 * fakes, 115 to 220 on the cluster, on 2 shared cores), so that every attacher finishes.
 */
export function defaultPhaseTimeoutMs(scenario: Scenario): number {
  // About three writes per attach; a phase may take five times the bucket's pace.
  const bucketSeconds = (scenario.count * 3) / scenario.qps;
  return Math.max(120_000, bucketSeconds * 5 * 1000, scenario.count * PHASE_MS_PER_OBJECT);
}

/** Runs one attacher through one scenario in a fresh environment. Never throws for run failures. */
export async function runOnce(
  deps: { environment: EnvironmentFactory; proc: ProcReader; progress: (line: string) => void },
  scenario: Scenario,
  attacher: AttacherUnderTest,
  options: RunOptions & { run: number },
): Promise<RunResult> {
  const result: RunResult = {
    attacher: attacher.label,
    scenario: scenario.name,
    run: options.run,
    ok: false,
    startupSeconds: NaN,
    attachSeconds: NaN,
    attachesPerSecond: NaN,
    steadyAttachesPerSecond: NaN,
    detachSeconds: NaN,
    detachesPerSecond: NaN,
    attachLatency: emptyLatency(),
    detachLatency: emptyLatency(),
    floodAttachLatencySeconds: NaN,
    phases: {},
    cpuSecondsTotal: NaN,
    peakRssBytes: NaN,
    restRssBytes: NaN,
    startupRssBytes: NaN,
    rssSeries: { at: [], bytes: [] },
    phaseTimes: {},
  };
  let env: BenchEnvironment;
  try {
    env = await deps.environment({
      count: scenario.count,
      nodes: scenario.nodes,
      prefix: options.prefix,
      ...(scenario.pods ? { pods: true } : {}),
      ...(scenario.unpublishDelayMs === undefined
        ? {}
        : { unpublishDelayMs: scenario.unpublishDelayMs }),
    });
  } catch (err) {
    result.error = `the environment did not start: ${
      err instanceof Error ? err.message : String(err)
    }`;
    return result;
  }
  const timeoutMs = options.phaseTimeoutMs ?? defaultPhaseTimeoutMs(scenario);
  const logFile = `${options.logDir}/${
    safeName(`${scenario.name}-${attacher.label}-${options.run}`)
  }.log`;
  await Deno.writeTextFile(logFile, `# ${attacher.commandLine}\n`);
  const flags: AttacherFlags = {
    kubeconfig: env.kubeconfigPath,
    csiAddress: env.csiAddress,
    workerThreads: scenario.workers,
    kubeApiQps: scenario.qps,
    kubeApiBurst: scenario.burst,
    verbosity: 1,
  };
  let proc: AttacherProcess | undefined;
  let sampler: ReturnType<typeof setInterval> | undefined;
  try {
    await env.createCanary();
    proc = AttacherProcess.start(attacher.commandLine, attacherArgs(flags), logFile);
    const p = proc;
    const rss = result.rssSeries;
    sampler = setInterval(() => {
      const s = deps.proc.sampleTree(p.pid);
      if (s === undefined) return;
      rss.at.push(nowMs());
      rss.bytes.push(s.rssBytes);
    }, rssSampleMs(scenario.count));
    const sample = (): TreeSample & { switches: ContextSwitches } => {
      const s = deps.proc.sampleTree(p.pid);
      if (s === undefined) throw new Error("the attacher exited");
      return { ...s, switches: deps.proc.contextSwitches(s.pids) };
    };
    const switchesSince = (a: ContextSwitches, b: ContextSwitches): ContextSwitches => ({
      voluntary: b.voluntary - a.voluntary,
      involuntary: b.involuntary - a.involuntary,
    });
    const helperCpu = (): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const [role, pid] of Object.entries(env.helperPids())) {
        out[role] = deps.proc.sample(pid)?.cpuSeconds ?? NaN;
      }
      return out;
    };
    const diff = (a: Record<string, number>, b: Record<string, number>) =>
      Object.fromEntries(Object.keys(b).map((k) => [k, (b[k] ?? NaN) - (a[k] ?? NaN)]));

    // 1. startup
    let helpers = helperCpu();
    const canary = await waitChecked(env, p, "canary", timeoutMs);
    result.startupSeconds = (canary.at - p.startedAt) / 1000;
    result.phaseTimes.startup = [p.startedAt, nowMs()];
    let cpu = sample();
    result.startupRssBytes = cpu.rssBytes;
    result.phases.startup = {
      requests: await env.takeRequests(),
      csiCalls: await env.takeCsiCalls(),
      cpuSeconds: cpu.cpuSeconds,
      helperCpuSeconds: diff(helpers, helperCpu()),
    };
    deps.progress(`  started in ${result.startupSeconds.toFixed(2)} s`);

    // 2. attach
    helpers = helperCpu();
    const attachStartedAt = nowMs();
    await env.startAttach();
    await waitChecked(env, p, "attached", timeoutMs);
    let requests = await quiet(env, options);
    result.phaseTimes.attach = [attachStartedAt, nowMs()];
    let next = sample();
    result.phases.attach = {
      requests,
      csiCalls: await env.takeCsiCalls(),
      cpuSeconds: next.cpuSeconds - cpu.cpuSeconds,
      helperCpuSeconds: diff(helpers, helperCpu()),
      switches: switchesSince(cpu.switches, next.switches),
    };
    cpu = next;

    // 3. rest
    helpers = helperCpu();
    const restStartedAt = nowMs();
    await sleep(options.restMs);
    result.phaseTimes.rest = [restStartedAt, nowMs()];
    next = sample();
    result.restRssBytes = next.rssBytes;
    result.phases.rest = {
      requests: await env.takeRequests(),
      csiCalls: await env.takeCsiCalls(),
      cpuSeconds: next.cpuSeconds - cpu.cpuSeconds,
      helperCpuSeconds: diff(helpers, helperCpu()),
      switches: switchesSince(cpu.switches, next.switches),
    };
    cpu = next;

    // 4. detach
    helpers = helperCpu();
    const detachStartedAt = nowMs();
    await env.startDetach();
    if (scenario.unpublishDelayMs !== undefined) {
      await env.createFloodProbe();
      await waitChecked(env, p, "flood", timeoutMs);
    }
    await waitChecked(env, p, "gone", timeoutMs);
    requests = await quiet(env, options);
    result.phaseTimes.detach = [detachStartedAt, nowMs()];
    next = sample();
    result.phases.detach = {
      requests,
      csiCalls: await env.takeCsiCalls(),
      cpuSeconds: next.cpuSeconds - cpu.cpuSeconds,
      helperCpuSeconds: diff(helpers, helperCpu()),
      switches: switchesSince(cpu.switches, next.switches),
    };
    result.cpuSecondsTotal = next.cpuSeconds;
    result.peakRssBytes = next.peakRssBytes;
    result.ok = true;
  } catch (err) {
    const tail = proc === undefined ? "" : await proc.logTail(15);
    result.error = `${err instanceof Error ? err.message : String(err)}${
      tail === "" ? "" : `\n--- attacher log (${logFile}) ---\n${tail}`
    }`;
    if (proc !== undefined) {
      const s = deps.proc.sampleTree(proc.pid);
      if (s !== undefined) result.peakRssBytes = s.peakRssBytes;
    }
  } finally {
    clearInterval(sampler);
    try {
      const timeline = await env.timeline();
      result.timeline = timeline;
      result.attachSeconds = (timeline.lastAttachedAt - timeline.attachStartedAt) / 1000;
      result.detachSeconds = (timeline.lastGoneAt - timeline.detachStartedAt) / 1000;
      result.attachesPerSecond = scenario.count / result.attachSeconds;
      const pace = timeline.attachPace;
      result.steadyAttachesPerSecond = pace.attaches / ((pace.ninetiethAt - pace.tenthAt) / 1000);
      result.detachesPerSecond = scenario.count / result.detachSeconds;
      result.attachLatency = toSeconds(timeline.attachLatencyMs);
      result.detachLatency = toSeconds(timeline.detachLatencyMs);
      result.floodAttachLatencySeconds = (timeline.floodAttachedAt - timeline.floodCreatedAt) /
        1000;
      if (timeline.pods !== undefined) {
        const p = timeline.pods;
        result.pods = {
          attachLatency: toSeconds(p.attachLatencyMs),
          allAttachedSeconds: (p.lastAttachedAt - p.createStartedAt) / 1000,
          detachLatency: toSeconds(p.detachLatencyMs),
          allDetachedSeconds: (p.lastDetachedAt - p.deleteStartedAt) / 1000,
        };
      }
    } finally {
      if (proc !== undefined) await proc.stop();
      await env.close();
    }
  }
  return result;
}

/**
 * Waits in short steps so that an attacher that exits is noticed at once.
 *
 * @throws {Error} when the attacher exits or the target is not reached in `timeoutMs`.
 */
async function waitChecked(
  env: BenchEnvironment,
  proc: AttacherProcess,
  target: WaitTarget,
  timeoutMs: number,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await env.wait(target, Math.min(2000, Math.max(1, deadline - Date.now())));
    if (answer.done) return answer;
    if (proc.exited !== undefined) {
      throw new Error(`the attacher exited with status ${proc.exited.code} waiting for ${target}`);
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `timed out after ${timeoutMs / 1000} s waiting for ${target} (${answer.count})`,
      );
    }
  }
}

/** Collects requests until none arrive for `quietMs` (at most `quietMaxMs`). */
async function quiet(env: BenchEnvironment, options: RunOptions): Promise<RequestCounts> {
  let out = await env.takeRequests();
  const deadline = Date.now() + options.quietMaxMs;
  while (Date.now() < deadline) {
    await sleep(options.quietMs);
    const more = await env.takeRequests();
    const n = Object.values(more.byKey).reduce((a, b) => a + b, 0);
    out = mergeCounts(out, more);
    if (n === 0) break;
  }
  return out;
}

function safeName(text: string): string {
  return text.replace(/[^a-zA-Z0-9.=-]+/g, "_");
}
