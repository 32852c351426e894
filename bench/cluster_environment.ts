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

import { ensureBinaries } from "../tests/e2e/binaries.ts";
import type { Binaries, KubernetesRelease } from "../tests/e2e/binaries.ts";
import { type ClusterInfo, LocalCluster, stopSavedCluster } from "../tests/e2e/cluster.ts";
import { parseDriverCalls } from "../tests/e2e/driver_log.ts";
import {
  controllerVaName,
  POD_NAMESPACE,
  sleep,
  uniqueVolumeName,
  waitUntil,
} from "../tests/e2e/kit.ts";
import { PATHS, persistentVolumeClaim, pod } from "../tests/e2e/objects.ts";
import { resolveSettings } from "../tests/e2e/settings.ts";
import type { KubeObject, VolumeAttachment } from "../lib/kube/types.ts";
import type { BenchEnvironment, EnvironmentFactory, LeaseHolderChange } from "./environment.ts";
import {
  CANARY,
  csiNode,
  type FixtureSpec,
  FLOOD_PROBE,
  hasProbe,
  nodeName,
  nodeOf,
  persistentVolume,
  podName,
  PROBE_PUBLISHES,
  pvcName,
  pvName,
  vaName,
  volumeAttachment,
  volumeId,
} from "./fixtures.ts";
import { countAuditRecords } from "./audit_counts.ts";
import { LogTail } from "./log_tail.ts";
import { PodTimeline } from "./pod_timeline.ts";
import { bump, type RequestCounts } from "./request_counts.ts";
import {
  type ChangeKind,
  nowMs,
  Timeline,
  type TimelineReport,
  type WaitAnswer,
} from "./timeline.ts";
import type { WaitTarget } from "./timeline.ts";

/** The mock driver's name; it is also the only node ID it accepts. */
const DRIVER_NAME = "io.kubernetes.storage.mock";

/** Requests the benchmark keeps in flight while creating or deleting objects. */
const CONCURRENCY = 32;

/** A Node as far as the `--pods` timeline reads it. */
interface NodeObject extends KubeObject {
  status?: { volumesAttached?: { name: string }[] | null };
}

/** A Lease as far as `--takeover` reads it. */
interface LeaseObject extends KubeObject {
  spec?: { holderIdentity?: string };
}

/** The namespace of the attachers' Lease (`--leader-election-namespace`) under `--takeover`. */
const LEASE_NAMESPACE = "default";

/** A PVC as far as the `--pods` seeding reads it. */
interface ClaimObject extends KubeObject {
  status?: { phase?: string };
}

function describe(pods: boolean, release: KubernetesRelease): string {
  return pods
    ? `e2e cluster (kube-apiserver ${release.version}, etcd, kube-controller-manager, CSI mock driver)`
    : `e2e cluster (kube-apiserver ${release.version}, etcd, CSI mock driver)`;
}

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
  /** `--pods`: the controller's VA names and the Nodes' volume names, by index. */
  readonly #vaIndex = new Map<string, number>();
  readonly #volumeIndex = new Map<string, number>();
  readonly #pods: PodTimeline | undefined;
  /** `--takeover`: the probe's volume handle, and every change of a Lease's holder as watched. */
  #probeHandle: string | undefined;
  readonly #leaseHolders: LeaseHolderChange[] = [];

  /** Use {@link ClusterEnvironment.start}. */
  constructor(
    deps: { cluster: LocalCluster },
    options: { spec: FixtureSpec; release: KubernetesRelease },
  ) {
    this.#cluster = deps.cluster;
    this.spec = options.spec;
    this.description = describe(options.spec.pods === true, options.release);
    this.kubeconfigPath = deps.cluster.info.attacherKubeconfig;
    this.csiAddress = deps.cluster.info.driverSocket;
    if (options.spec.pods) {
      this.#timeline = new Timeline({}, {
        spec: options.spec,
        indexOf: (name) => this.#vaIndex.get(name),
      });
      this.#pods = new PodTimeline({}, {
        count: options.spec.count,
        indexOf: (name) => this.#volumeIndex.get(name),
      });
    } else {
      this.#timeline = new Timeline({}, { spec: options.spec });
    }
    this.#audit = new LogTail({ path: deps.cluster.info.auditLog });
    this.#driverLog = new LogTail({ path: deps.cluster.info.driverLog });
  }

  /**
   * Starts a cluster in `dir` (removed first, after stopping what a benchmark that was killed may
   * have left running there), then creates the run's CSINodes, driver volumes and PVs and starts
   * watching VolumeAttachments. With `params.pods` the cluster also runs kube-controller-manager,
   * the nodes are Nodes with their CSINodes, each PV gets a bound PVC, and the Nodes are watched
   * too. On failure the cluster is stopped.
   */
  static async start(
    options: {
      dir: string;
      binaries: Binaries;
      /** The release `binaries` were built from (named in the description). */
      release: KubernetesRelease;
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
      controllerManager: options.params.pods === true,
      // The driver is never restarted here, and its state file costs each call in proportion to
      // the volumes (tests/e2e/cluster.ts, driverStateFile).
      driverStateFile: false,
    });
    const spec: FixtureSpec = { ...options.params, driver: DRIVER_NAME, sharedNodeId: DRIVER_NAME };
    const env = new ClusterEnvironment({ cluster }, { spec, release: options.release });
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
      if (spec.pods) await this.#cluster.addNode(nodeName(spec, n));
      else await admin.createOk(PATHS.csiNodes, csiNode(spec, n));
    });
    // The mock driver names volumes itself: the PV's handle is the ID CreateVolume returns.
    const indexes = [CANARY, ...Array.from({ length: spec.count }, (_, i) => i)];
    if (hasProbe(spec)) indexes.push(FLOOD_PROBE);
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
    if (spec.pods) await this.#seedClaims(indexes, handles);
    this.#probeHandle = handles.get(FLOOD_PROBE);
    log(
      `  cluster seeded with ${spec.nodes} ${spec.pods ? "Nodes" : "CSINodes"}, ${indexes.length} ${
        spec.pods ? "volumes, PVs and bound PVCs" : "volumes and PVs"
      } in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const vas = await admin.getOk<{ metadata: { resourceVersion: string } }>(
      `${PATHS.volumeAttachments}?limit=1`,
    );
    const watches = [
      this.#watch<VolumeAttachment>(
        PATHS.volumeAttachments,
        vas.metadata.resourceVersion,
        (t, o) => {
          this.#timeline.observe(t, o);
        },
      ),
    ];
    if (spec.takeover) {
      const path = PATHS.leases(LEASE_NAMESPACE);
      const leases = await admin.getOk<{ metadata: { resourceVersion: string } }>(
        `${path}?limit=1`,
      );
      watches.push(
        this.#watch<LeaseObject>(path, leases.metadata.resourceVersion, (type, lease) => {
          const holder = type === "DELETED" ? "" : lease.spec?.holderIdentity ?? "";
          const name = lease.metadata.name;
          const last = this.#leaseHolders.findLast((c) => c.lease === name);
          if (last?.holder !== holder) {
            this.#leaseHolders.push({ lease: name, holder, at: nowMs() });
          }
        }),
      );
    }
    const pods = this.#pods;
    if (pods !== undefined) {
      const list = await admin.getOk<{ metadata: { resourceVersion: string } }>(
        `${PATHS.nodes}?limit=1`,
      );
      watches.push(
        this.#watch<NodeObject>(PATHS.nodes, list.metadata.resourceVersion, (type, node) => {
          const names = type === "DELETED"
            ? []
            : (node.status?.volumesAttached ?? []).map((v) => v.name);
          pods.observeNode(node.metadata.name, names);
        }),
      );
    }
    this.#watching = Promise.all(watches).then(() => {});
    await this.#audit.skip();
    await this.#driverLog.skip();
  }

  /**
   * `--pods`: the names the controller and the Nodes use for each index, the `default`
   * ServiceAccount that Pod admission needs, and a PVC per PV, bound by the binder.
   */
  async #seedClaims(indexes: number[], handles: Map<number, string>): Promise<void> {
    const { spec } = this;
    const admin = this.#cluster.admin;
    for (const i of indexes) {
      const handle = handles.get(i) as string;
      const node = nodeName(spec, nodeOf(spec, i));
      this.#vaIndex.set(await controllerVaName(handle, spec.driver, node), i);
      this.#volumeIndex.set(uniqueVolumeName(spec.driver, handle), i);
    }
    await forEachLimited(indexes, CONCURRENCY, async (i) => {
      await admin.createOk(
        PATHS.persistentVolumeClaims(POD_NAMESPACE),
        persistentVolumeClaim(pvcName(spec, i), POD_NAMESPACE, pvName(spec, i)),
      );
    });
    await waitUntil("the default ServiceAccount", async () => {
      return await admin.find(`/api/v1/namespaces/${POD_NAMESPACE}/serviceaccounts/default`) !==
        undefined;
    });
    const claims = new Set(indexes.map((i) => pvcName(spec, i)));
    await waitUntil(
      `${claims.size} PVCs bound`,
      async () => {
        const list = await admin.getOk<{ items: ClaimObject[] }>(
          PATHS.persistentVolumeClaims(POD_NAMESPACE),
        );
        const bound = list.items.filter((c) =>
          claims.has(c.metadata.name) && c.status?.phase === "Bound"
        );
        return bound.length === claims.size;
      },
      120_000,
      250,
    );
  }

  /** Feeds `observe` from a watch of `collection`, reopened from the last version on end. */
  async #watch<T extends KubeObject>(
    collection: string,
    fromVersion: string,
    observe: (type: ChangeKind, object: T) => void,
  ): Promise<void> {
    let version = fromVersion;
    const signal = this.#watchStop.signal;
    while (!signal.aborted) {
      const path = `${collection}?watch=true&allowWatchBookmarks=true` +
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
            const ev = JSON.parse(line) as { type: string; object: T };
            if (ev.type === "ERROR") throw new Error(`watch error: ${line}`);
            version = ev.object.metadata.resourceVersion ?? version;
            if (ev.type === "BOOKMARK") continue;
            observe(ev.type as ChangeKind, ev.object);
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
    if (this.spec.pods) return await this.#createPod(CANARY);
    await this.#cluster.admin.createOk(
      PATHS.volumeAttachments,
      volumeAttachment(this.spec, CANARY),
    );
  }

  /** `--pods`: the Pod of `index` on its node, with its PVC. */
  async #createPod(index: number): Promise<void> {
    const { spec } = this;
    if (index >= 0) this.#pods?.podCreating(index);
    await this.#cluster.admin.createOk(
      PATHS.pods(POD_NAMESPACE),
      pod(podName(spec, index), POD_NAMESPACE, nodeName(spec, nodeOf(spec, index)), [
        pvcName(spec, index),
      ]),
    );
  }

  async startAttach(): Promise<void> {
    this.#timeline.attachStarted();
    if (this.spec.pods) {
      const indexes = Array.from({ length: this.spec.count }, (_, i) => i);
      return await forEachLimited(indexes, CONCURRENCY, (i) => this.#createPod(i));
    }
    const vas = Array.from({ length: this.spec.count }, (_, i) => volumeAttachment(this.spec, i));
    await forEachLimited(vas, CONCURRENCY, async (va) => {
      await this.#cluster.admin.createOk(PATHS.volumeAttachments, va);
    });
  }

  async createFloodProbe(): Promise<void> {
    // The CSI mock driver cannot slow its unpublishes down on request: only the takeover's probe.
    if (!this.spec.takeover) throw new Error("the detach flood runs only with --fake");
    await this.#cluster.admin.createOk(
      PATHS.volumeAttachments,
      volumeAttachment(this.spec, FLOOD_PROBE),
    );
  }

  /** `--takeover`: the Lease holder changes seen by the watch (its receive times). */
  leaseHolders(): Promise<LeaseHolderChange[]> {
    return Promise.resolve([...this.#leaseHolders]);
  }

  async startDetach(): Promise<void> {
    this.#timeline.detachStarted();
    if (this.spec.pods) {
      // As `kubectl delete pod --grace-period=0 --force`: no kubelet would confirm a graceful one.
      const indexes = Array.from({ length: this.spec.count }, (_, i) => i);
      return await forEachLimited(indexes, CONCURRENCY, async (i) => {
        this.#pods?.podDeleting(i);
        const path = `${PATHS.pods(POD_NAMESPACE)}/${podName(this.spec, i)}`;
        const res = await this.#cluster.admin.request("DELETE", path, {
          body: { gracePeriodSeconds: 0 },
        });
        if (res.status !== 200 && res.status !== 202) {
          throw new Error(`DELETE ${path}: HTTP ${res.status}: ${res.text.slice(0, 300)}`);
        }
      });
    }
    const names = Array.from({ length: this.spec.count }, (_, i) => vaName(this.spec, i));
    await forEachLimited(names, CONCURRENCY, async (name) => {
      await this.#cluster.admin.deleteOk(`${PATHS.volumeAttachments}/${name}`);
    });
  }

  async wait(target: WaitTarget, timeoutMs: number): Promise<WaitAnswer> {
    const deadline = Date.now() + timeoutMs;
    const vas = await Promise.race([
      this.#timeline.wait(target, timeoutMs),
      // A failed watch must not look like a slow attacher.
      this.#watching.then(() => this.#timeline.state(target)),
    ]);
    const pods = this.#pods;
    if (pods === undefined || !vas.done || (target !== "attached" && target !== "gone")) return vas;
    // `--pods`: also every volume in (or out of) its Node's list. The times come from the watch;
    // polling only decides when the run goes on.
    for (;;) {
      const answer = pods.state(target);
      if (answer.done) return { ...answer, at: Math.max(answer.at, vas.at) };
      if (Date.now() >= deadline || this.#watchStop.signal.aborted) {
        return { ...answer, done: false };
      }
      // A failed watch rejects here rather than look like a slow controller.
      await Promise.race([sleep(50), this.#watching.then(() => sleep(50))]);
    }
  }

  async takeRequests(): Promise<RequestCounts> {
    return countAuditRecords(await this.#audit.take());
  }

  async takeCsiCalls(): Promise<Record<string, number>> {
    const lines = await this.#driverLog.take();
    const out: Record<string, number> = {};
    for (const call of parseDriverCalls(lines.join("\n"))) {
      const method = call.method.split("/").at(-1) ?? call.method;
      bump(out, method);
      // The takeover counts the probe's publishes apart from those of VAs already attached.
      if (
        method === "ControllerPublishVolume" && this.#probeHandle !== undefined &&
        call.request.volume_id === this.#probeHandle
      ) {
        bump(out, PROBE_PUBLISHES);
      }
    }
    return out;
  }

  timeline(): Promise<TimelineReport> {
    const report = this.#timeline.report();
    if (this.#pods !== undefined) report.pods = this.#pods.report();
    return Promise.resolve(report);
  }

  helperPids(): Record<string, number> {
    const { pids } = this.#cluster.info;
    const out: Record<string, number> = {
      apiServer: pids.apiserver,
      etcd: pids.etcd,
      driver: pids.driver,
    };
    if (pids.controllerManager > 0) out.controllerManager = pids.controllerManager;
    return out;
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
    /** `--pods`: the description names kube-controller-manager. */
    pods?: boolean;
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
      release: settings.kubernetes,
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
      ClusterEnvironment.start({
        dir,
        binaries,
        release: settings.kubernetes,
        rbacManifest,
        params,
        log: options.log,
      }),
    description: describe(options.pods === true, settings.kubernetes),
  };
}
