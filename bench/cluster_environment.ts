/**
 * The benchmark environment on the end-to-end suite's local cluster: a real kube-apiserver on
 * etcd and the Kubernetes e2e CSI mock driver (see `tests/e2e/cluster.ts`). Each run gets a fresh
 * cluster in its own directory, so no run inherits another's objects, etcd history or driver
 * state; a cluster started with `deno task cluster` is left alone.
 *
 * The attacher authenticates as the suite's attacher user, whose requests (and only those) the
 * API server writes to its audit log: the request counts come from there. CSI calls come from the
 * driver's own call log. The timeline comes from a watch on the run's VolumeAttachments.
 *
 * @module
 */

import { ensureBinaries, KUBERNETES_VERSION } from "../tests/e2e/binaries.ts";
import type { Binaries } from "../tests/e2e/binaries.ts";
import { type ClusterInfo, LocalCluster, stopSavedCluster } from "../tests/e2e/cluster.ts";
import { parseDriverCalls } from "../tests/e2e/driver_log.ts";
import { PATHS } from "../tests/e2e/objects.ts";
import { resolveSettings } from "../tests/e2e/settings.ts";
import type { VolumeAttachment } from "../attacher/kube/types.ts";
import type { BenchEnvironment, EnvironmentFactory } from "./environment.ts";
import {
  CANARY,
  csiNode,
  type FixtureSpec,
  persistentVolume,
  vaName,
  volumeAttachment,
  volumeId,
} from "./fixtures.ts";
import { countAuditRecords } from "./audit_counts.ts";
import { LogTail } from "./log_tail.ts";
import { bump, type RequestCounts } from "./request_counts.ts";
import { type ChangeKind, Timeline, type TimelineReport, type WaitAnswer } from "./timeline.ts";
import type { WaitTarget } from "./timeline.ts";

/** The mock driver's name; it is also the only node ID it accepts. */
const DRIVER_NAME = "io.kubernetes.storage.mock";

/** Requests the benchmark keeps in flight while creating or deleting objects. */
const CONCURRENCY = 32;

/** Runs `fn` over `items` with at most `limit` calls in flight. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  });
  await Promise.all(workers);
}

/** Stops the cluster a previous benchmark process left in `dir` (its `cluster.json`), if any. */
async function stopLeftover(dir: string): Promise<void> {
  let info: ClusterInfo;
  try {
    info = JSON.parse(await Deno.readTextFile(`${dir}/cluster.json`)) as ClusterInfo;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  await stopSavedCluster(info);
}

/** {@link BenchEnvironment} on a fresh local cluster. Create with {@link ClusterEnvironment.start}. */
export class ClusterEnvironment implements BenchEnvironment {
  readonly description: string;
  readonly spec: FixtureSpec;
  readonly kubeconfigPath: string;
  readonly csiAddress: string;
  readonly #cluster: LocalCluster;
  readonly #timeline: Timeline;
  readonly #audit: LogTail;
  readonly #driverLog: LogTail;
  readonly #watchStop = new AbortController();
  #watching: Promise<void> = Promise.resolve();

  /** Use {@link ClusterEnvironment.start}. */
  constructor(deps: { cluster: LocalCluster }, options: { spec: FixtureSpec }) {
    this.#cluster = deps.cluster;
    this.spec = options.spec;
    this.description = `e2e cluster (kube-apiserver ${KUBERNETES_VERSION}, etcd, CSI mock driver)`;
    this.kubeconfigPath = deps.cluster.info.attacherKubeconfig;
    this.csiAddress = deps.cluster.info.driverSocket;
    this.#timeline = new Timeline({}, { spec: options.spec });
    this.#audit = new LogTail({ path: deps.cluster.info.auditLog });
    this.#driverLog = new LogTail({ path: deps.cluster.info.driverLog });
  }

  /**
   * Starts a cluster in `dir` (removed first, after stopping what a benchmark that was killed may
   * have left running there), then creates the run's CSINodes, driver volumes and PVs and starts
   * watching VolumeAttachments. On failure the cluster is stopped.
   */
  static async start(
    options: {
      dir: string;
      binaries: Binaries;
      rbacManifest: string;
      params: Omit<FixtureSpec, "driver">;
      log: (line: string) => void;
    },
  ): Promise<ClusterEnvironment> {
    await stopLeftover(options.dir);
    await Deno.remove(options.dir, { recursive: true }).catch((err: unknown) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
    const cluster = await LocalCluster.start({
      dir: options.dir,
      binaries: options.binaries,
      driverName: DRIVER_NAME,
      rbacManifest: options.rbacManifest,
      log: () => {},
    });
    const spec: FixtureSpec = { ...options.params, driver: DRIVER_NAME, sharedNodeId: DRIVER_NAME };
    const env = new ClusterEnvironment({ cluster }, { spec });
    try {
      await env.#seed(options.log);
      return env;
    } catch (err) {
      await env.close();
      throw err;
    }
  }

  async #seed(log: (line: string) => void): Promise<void> {
    const { spec } = this;
    const admin = this.#cluster.admin;
    const t0 = performance.now();
    const nodes = Array.from({ length: spec.nodes }, (_, n) => n);
    await forEachLimited(nodes, CONCURRENCY, async (n) => {
      await admin.createOk(PATHS.csiNodes, csiNode(spec, n));
    });
    // The mock driver names volumes itself: the PV's handle is the ID CreateVolume returns.
    const indexes = [CANARY, ...Array.from({ length: spec.count }, (_, i) => i)];
    const handles = new Map<number, string>();
    const driver = this.#cluster.driver();
    await forEachLimited(indexes, 4, async (i) => {
      handles.set(i, await driver.createVolume(volumeId(spec, i)));
    });
    await forEachLimited(indexes, CONCURRENCY, async (i) => {
      const pv = persistentVolume(spec, i);
      if (pv.spec.csi) pv.spec.csi.volumeHandle = handles.get(i) as string;
      await admin.createOk(PATHS.persistentVolumes, pv);
    });
    log(
      `  cluster seeded with ${spec.nodes} CSINodes, ${indexes.length} volumes and PVs in ${
        ((performance.now() - t0) / 1000).toFixed(1)
      } s`,
    );
    const list = await admin.getOk<{ metadata: { resourceVersion: string } }>(
      `${PATHS.volumeAttachments}?limit=1`,
    );
    this.#watching = this.#watch(list.metadata.resourceVersion);
    await this.#audit.skip();
    await this.#driverLog.skip();
  }

  /** Feeds the timeline from a VolumeAttachment watch, reopened from the last version on end. */
  async #watch(fromVersion: string): Promise<void> {
    let version = fromVersion;
    const signal = this.#watchStop.signal;
    while (!signal.aborted) {
      const path = `${PATHS.volumeAttachments}?watch=true&allowWatchBookmarks=true` +
        `&resourceVersion=${version}&timeoutSeconds=3600`;
      let res: Response;
      try {
        res = await this.#cluster.admin.stream(path, signal);
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      }
      if (res.status !== 200 || res.body === null) {
        throw new Error(`watch ${path}: HTTP ${res.status}: ${await res.text()}`);
      }
      // Aborting the fetch does not end a pending read of its body: cancel the reader instead.
      const reader = res.body.getReader();
      const cancel = () => {
        reader.cancel().catch((err: unknown) => {
          if (!signal.aborted) throw err;
        });
      };
      signal.addEventListener("abort", cancel, { once: true });
      const decoder = new TextDecoder();
      let buffered = "";
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += decoder.decode(value, { stream: true });
          let nl: number;
          while ((nl = buffered.indexOf("\n")) >= 0) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            if (line.trim() === "") continue;
            const ev = JSON.parse(line) as { type: string; object: VolumeAttachment };
            if (ev.type === "ERROR") throw new Error(`watch error: ${line}`);
            version = ev.object.metadata.resourceVersion ?? version;
            if (ev.type === "BOOKMARK") continue;
            this.#timeline.observe(ev.type as ChangeKind, ev.object);
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      } finally {
        signal.removeEventListener("abort", cancel);
      }
    }
  }

  async createCanary(): Promise<void> {
    await this.#cluster.admin.createOk(
      PATHS.volumeAttachments,
      volumeAttachment(this.spec, CANARY),
    );
  }

  async startAttach(): Promise<void> {
    this.#timeline.attachStarted();
    const vas = Array.from({ length: this.spec.count }, (_, i) => volumeAttachment(this.spec, i));
    await forEachLimited(vas, CONCURRENCY, async (va) => {
      await this.#cluster.admin.createOk(PATHS.volumeAttachments, va);
    });
  }

  createFloodProbe(): Promise<void> {
    // The CSI mock driver cannot slow its unpublishes down on request.
    return Promise.reject(new Error("the detach flood runs only with --fake"));
  }

  async startDetach(): Promise<void> {
    this.#timeline.detachStarted();
    const names = Array.from({ length: this.spec.count }, (_, i) => vaName(this.spec, i));
    await forEachLimited(names, CONCURRENCY, async (name) => {
      await this.#cluster.admin.deleteOk(`${PATHS.volumeAttachments}/${name}`);
    });
  }

  wait(target: WaitTarget, timeoutMs: number): Promise<WaitAnswer> {
    return Promise.race([
      this.#timeline.wait(target, timeoutMs),
      // A failed watch must not look like a slow attacher.
      this.#watching.then(() => this.#timeline.state(target)),
    ]);
  }

  async takeRequests(): Promise<RequestCounts> {
    return countAuditRecords(await this.#audit.take());
  }

  async takeCsiCalls(): Promise<Record<string, number>> {
    const lines = await this.#driverLog.take();
    const out: Record<string, number> = {};
    for (const call of parseDriverCalls(lines.join("\n"))) {
      bump(out, call.method.split("/").at(-1) ?? call.method);
    }
    return out;
  }

  timeline(): Promise<TimelineReport> {
    return Promise.resolve(this.#timeline.report());
  }

  helperPids(): Record<string, number> {
    const { pids } = this.#cluster.info;
    return { apiServer: pids.apiserver, etcd: pids.etcd, driver: pids.driver };
  }

  async close(): Promise<void> {
    this.#watchStop.abort();
    this.#timeline.cancelWaits();
    await this.#watching.catch((err: unknown) => {
      if (!this.#watchStop.signal.aborted) throw err;
    });
    await this.#cluster.stop();
    await Deno.remove(this.#cluster.info.dir, { recursive: true }).catch((err: unknown) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
  }
}

/**
 * Prepares cluster runs: resolves the e2e settings and builds (or finds) kube-apiserver, etcd and
 * the mock driver. Resolves undefined, after saying why through `log`, when that is not possible
 * here (no Go toolchain, a failed build), so the caller can fall back to the fakes.
 */
export async function openClusterEnvironment(
  options: {
    log: (line: string) => void;
    env: (name: string) => string | undefined;
  },
): Promise<{ factory: EnvironmentFactory; description: string } | undefined> {
  let binaries: Binaries;
  let settings;
  try {
    settings = await resolveSettings(options.env);
    const build = await ensureBinaries({
      cacheDir: settings.cacheDir,
      go: settings.go,
      jobs: settings.goJobs,
      log: options.log,
    });
    binaries = build.binaries;
  } catch (err) {
    options.log(`Cannot prepare the e2e cluster: ${err instanceof Error ? err.message : err}`);
    return undefined;
  }
  const dir = `${settings.cacheDir}/bench-cluster`;
  const rbacManifest = settings.rbacManifest.text;
  return {
    factory: (params) =>
      ClusterEnvironment.start({ dir, binaries, rbacManifest, params, log: options.log }),
    description: `e2e cluster (kube-apiserver ${KUBERNETES_VERSION}, etcd, CSI mock driver)`,
  };
}
