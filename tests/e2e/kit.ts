/**
 * What the end-to-end scenarios share: waiting for states through the API, making volumes (driver
 * volume + PV), reading the driver's state, parsing the attacher's log, and cleaning up.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import type { LocalCluster } from "./cluster.ts";
import {
  PATHS,
  persistentVolume,
  persistentVolumeClaim,
  pod,
  type PvOptions,
  volumeAttachment,
} from "./objects.ts";
import type { ManagedProcess } from "./process.ts";

/** The annotation the attacher stores the node ID in. */
export const NODE_ID_ANNOTATION = "csi.alpha.kubernetes.io/node-id";

/** Our finalizer for a driver name, derived independently of the product code. */
export function finalizerFor(driverName: string): string {
  const sanitized = driverName.replace(/[^a-zA-Z0-9-]/g, "-");
  return `external-attacher/${sanitized.endsWith("-") ? `${sanitized}X` : sanitized}`;
}

/** The namespace of the scenarios' Pods and PVCs. */
export const POD_NAMESPACE = "default";

/**
 * The name under which the attach/detach controller and the Node's `status.volumesAttached` know
 * a CSI volume (kubernetes pkg/volume/csi/csi_plugin.go, GetVolumeName, prefixed with the
 * plugin name `kubernetes.io/csi`).
 */
export function uniqueVolumeName(driver: string, volumeHandle: string): string {
  return `kubernetes.io/csi/${driver}^${volumeHandle}`;
}

/**
 * The VolumeAttachment name the attach/detach controller uses: `csi-` and the SHA-256 of volume
 * handle, driver and node name (kubernetes pkg/volume/csi/csi_attacher.go, getAttachmentName).
 */
export async function controllerVaName(
  volumeHandle: string,
  driver: string,
  node: string,
): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`${volumeHandle}${driver}${node}`),
  );
  return `csi-${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** A Node as far as the scenarios read it. */
export interface NodeStatusView {
  metadata: { name: string };
  status?: { volumesAttached?: { name: string; devicePath: string }[] | null };
}

/** A Pod as far as the scenarios read it. */
export interface PodView {
  metadata: { name: string; deletionTimestamp?: string };
  status?: { phase?: string };
}

/** An Event as far as the scenarios read it. */
export interface EventView {
  reason?: string;
  message?: string;
  type?: string;
  involvedObject: { kind?: string; name?: string };
  source?: { component?: string };
  reportingComponent?: string;
}

/** Waits `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Thrown by a {@link waitUntil} probe to stop waiting at once. */
export class GiveUpError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "GiveUpError";
  }
}

/**
 * Polls `probe` every `intervalMs` until it returns something other than undefined or false, and
 * returns that. Probe errors are retried (the API server may be restarting), except
 * {@link GiveUpError}, which rejects at once. Rejects after `timeoutMs` with `what` and the last
 * probe error or value.
 */
export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
      last = value;
    } catch (err) {
      if (err instanceof GiveUpError) throw err;
      last = err;
    }
    if (Date.now() >= deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${detail})`);
    }
    await sleep(intervalMs);
  }
}

/** One scenario's view of the cluster: names are prefixed, and everything it made is cleaned up. */
export class ScenarioKit {
  readonly cluster: LocalCluster;
  readonly prefix: string;
  readonly driverName: string;
  readonly finalizer: string;
  readonly #vas = new Set<string>();
  readonly #pvs = new Set<string>();
  readonly #pods = new Set<string>();
  readonly #claims = new Set<string>();
  readonly #extra: string[] = [];

  constructor(cluster: LocalCluster, prefix: string) {
    this.cluster = cluster;
    this.prefix = prefix;
    this.driverName = cluster.info.driverName;
    this.finalizer = finalizerFor(this.driverName);
  }

  /** The API client of the suite's administrator. */
  get api() {
    return this.cluster.admin;
  }

  /** Creates a driver volume (CreateVolume) and a PV for it; returns the PV name and volume ID. */
  async makeVolume(
    name: string,
    opts: PvOptions = {},
  ): Promise<{ pv: string; volumeId: string }> {
    const pv = `${this.prefix}-${name}`;
    const volumeId = await this.cluster.driver().createVolume(pv);
    await this.createPv(pv, volumeId, opts);
    return { pv, volumeId };
  }

  /** Creates a PV for an existing driver volume. */
  async createPv(pv: string, volumeId: string, opts: PvOptions = {}): Promise<void> {
    await this.api.createOk(
      PATHS.persistentVolumes,
      persistentVolume(pv, this.driverName, volumeId, opts),
    );
    this.#pvs.add(pv);
  }

  /** Creates a VolumeAttachment of our driver. */
  async createVa(name: string, node: string, pv: string): Promise<string> {
    const va = `${this.prefix}-${name}`;
    this.#vas.add(va);
    await this.api.createOk(
      PATHS.volumeAttachments,
      volumeAttachment(va, this.driverName, node, pv),
    );
    return va;
  }

  /**
   * Creates a PVC `<prefix>-<name>` for the PV `pv` (the binder binds them; without `pv`, any PV
   * of `storage` or more); returns its name.
   */
  async createClaim(name: string, pv: string | undefined, storage = "1Gi"): Promise<string> {
    const claim = `${this.prefix}-${name}`;
    this.#claims.add(claim);
    await this.api.createOk(
      PATHS.persistentVolumeClaims(POD_NAMESPACE),
      persistentVolumeClaim(claim, POD_NAMESPACE, pv, storage),
    );
    return claim;
  }

  /** Creates a Pod `<prefix>-<name>` on `node` mounting the PVCs `claims`; returns its name. */
  async createPod(name: string, node: string, claims: string[]): Promise<string> {
    const podName = `${this.prefix}-${name}`;
    this.#pods.add(podName);
    await this.api.createOk(PATHS.pods(POD_NAMESPACE), pod(podName, POD_NAMESPACE, node, claims));
    return podName;
  }

  /**
   * Deletes a Pod. Gracefully (`kubectl delete pod`) it only gets a deletionTimestamp, since no
   * kubelet confirms; `force` (grace period 0, `--grace-period=0 --force`) removes it at once.
   */
  async deletePod(name: string, force = true): Promise<void> {
    const body = force ? { gracePeriodSeconds: 0 } : undefined;
    const res = await this.api.request("DELETE", `${PATHS.pods(POD_NAMESPACE)}/${name}`, { body });
    if (res.status !== 200 && res.status !== 202 && res.status !== 404) {
      throw new Error(`DELETE pod ${name}: HTTP ${res.status}: ${res.text.slice(0, 300)}`);
    }
    if (force) this.#pods.delete(name);
  }

  /** A Pod, or undefined when it does not exist. */
  podObject(name: string): Promise<PodView | undefined> {
    return this.api.find<PodView>(`${PATHS.pods(POD_NAMESPACE)}/${name}`);
  }

  /** Every VolumeAttachment of the PV `pv`. */
  async vasOf(pv: string): Promise<VolumeAttachment[]> {
    const list = await this.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
    return list.items.filter((va) => va.spec.source.persistentVolumeName === pv);
  }

  /** Waits until the VolumeAttachment of `pv` on `node` is attached; returns it. */
  waitVaAttached(pv: string, node: string, timeoutMs = 60_000): Promise<VolumeAttachment> {
    return waitUntil(`the VolumeAttachment of ${pv} on ${node} attached`, async () => {
      const va = (await this.vasOf(pv)).find((v) => v.spec.nodeName === node);
      return va?.status?.attached === true ? va : undefined;
    }, timeoutMs);
  }

  /** Waits until no VolumeAttachment of `pv` on `node` exists. */
  waitVaGone(pv: string, node: string, timeoutMs = 60_000): Promise<true> {
    return waitUntil(`the VolumeAttachment of ${pv} on ${node} to be gone`, async () => {
      return !(await this.vasOf(pv)).some((v) => v.spec.nodeName === node);
    }, timeoutMs);
  }

  /** The names in the Node's `status.volumesAttached` (written by the attach/detach controller). */
  async volumesAttached(node: string): Promise<string[]> {
    const obj = await this.api.getOk<NodeStatusView>(`${PATHS.nodes}/${node}`);
    return (obj.status?.volumesAttached ?? []).map((v) => v.name).sort();
  }

  /** Waits until the Node's `status.volumesAttached` lists exactly `names` (in any order). */
  waitVolumesAttached(node: string, names: readonly string[], timeoutMs = 60_000): Promise<true> {
    const want = JSON.stringify([...names].sort());
    let last = "";
    return waitUntil(`node ${node} status.volumesAttached = ${want}`, async () => {
      last = JSON.stringify(await this.volumesAttached(node));
      if (last === want) return true;
      throw new Error(`it lists ${last}`);
    }, timeoutMs);
  }

  /** The Events about the object `name` (a Pod or PVC) in the scenarios' namespace. */
  async events(name: string): Promise<EventView[]> {
    const list = await this.api.getOk<{ items: EventView[] }>(
      `${PATHS.events(POD_NAMESPACE)}?fieldSelector=involvedObject.name%3D${name}`,
    );
    return list.items;
  }

  /** Waits for an Event about `name` with `reason` whose message matches `pattern`. */
  waitEvent(
    name: string,
    reason: string,
    pattern: RegExp,
    timeoutMs = 60_000,
  ): Promise<EventView> {
    return waitUntil(`event ${reason} ${pattern} on ${name}`, async () => {
      return (await this.events(name)).find((e) =>
        e.reason === reason && pattern.test(e.message ?? "")
      );
    }, timeoutMs);
  }

  /** Registers an object path to delete at cleanup (secrets, CSINodes, bindings). */
  track(path: string): void {
    this.#extra.push(path);
  }

  /** A VolumeAttachment, or undefined when it does not exist. */
  va(name: string): Promise<VolumeAttachment | undefined> {
    return this.api.find<VolumeAttachment>(`${PATHS.volumeAttachments}/${name}`);
  }

  /** A PersistentVolume, or undefined when it does not exist. */
  pv(name: string): Promise<PersistentVolume | undefined> {
    return this.api.find<PersistentVolume>(`${PATHS.persistentVolumes}/${name}`);
  }

  /** Waits until the VA is attached; returns it. */
  waitAttached(name: string, timeoutMs = 60_000): Promise<VolumeAttachment> {
    return waitUntil(`VolumeAttachment ${name} attached`, async () => {
      const va = await this.va(name);
      return va?.status?.attached === true ? va : undefined;
    }, timeoutMs);
  }

  /** Waits until every VA in `names` is attached. */
  async waitAllAttached(names: readonly string[], timeoutMs = 120_000): Promise<void> {
    await waitUntil(
      `${names.length} VolumeAttachments attached`,
      async () => {
        const list = await this.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
        const attached = new Set(
          list.items.filter((va) => va.status?.attached === true).map((va) => va.metadata.name),
        );
        return names.every((n) => attached.has(n));
      },
      timeoutMs,
      500,
    );
  }

  /** Waits until the VA has an attachError; returns its message. */
  waitAttachError(name: string, timeoutMs = 60_000): Promise<string> {
    return waitUntil(`attachError on ${name}`, async () => {
      const va = await this.va(name);
      return va?.status?.attachError?.message;
    }, timeoutMs);
  }

  /** Waits until an object path answers 404. */
  waitGone(path: string, timeoutMs = 60_000): Promise<true> {
    return waitUntil(`${path} to be gone`, async () => {
      return (await this.api.find(path)) === undefined;
    }, timeoutMs);
  }

  /** Deletes VAs and waits until the API server removed them (after the attacher's detach). */
  async deleteVas(names: readonly string[], timeoutMs = 120_000): Promise<void> {
    await Promise.all(names.map((n) => this.api.deleteOk(`${PATHS.volumeAttachments}/${n}`)));
    await waitUntil(
      `${names.length} VolumeAttachments to be gone`,
      async () => {
        const list = await this.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
        const left = new Set(list.items.map((va) => va.metadata.name));
        return names.every((n) => !left.has(n));
      },
      timeoutMs,
      500,
    );
    for (const n of names) this.#vas.delete(n);
  }

  /** True when the driver has `volumeId` published on `nodeId` (mock driver state). */
  async publishedOnDriver(volumeId: string, nodeId: string): Promise<boolean> {
    const volumes = await this.cluster.driver().listVolumes();
    const volume = volumes.find((v) => v.volumeId === volumeId);
    assert.ok(volume !== undefined, `the driver has no volume ${volumeId}`);
    return volume.volumeContext[`${nodeId}/dev`] === "/dev/mock";
  }

  /** The IDs of the volumes the driver has published on `nodeId`. */
  async publishedVolumes(nodeId: string): Promise<Set<string>> {
    const volumes = await this.cluster.driver().listVolumes();
    return new Set(
      volumes.filter((v) => v.volumeContext[`${nodeId}/dev`] === "/dev/mock").map((v) =>
        v.volumeId
      ),
    );
  }

  /**
   * Removes what the scenario made. With an attacher running, VAs are detached normally; finally
   * every remaining finalizer of ours is stripped by force so the next scenario starts clean.
   */
  async cleanup(attacherRunning: boolean): Promise<void> {
    // Pods first: the attach/detach controller then deletes their VolumeAttachments.
    for (const p of this.#pods) await this.deletePod(p, true);
    for (const c of this.#claims) {
      await this.api.deleteOk(`${PATHS.persistentVolumeClaims(POD_NAMESPACE)}/${c}`);
    }
    if (this.#pvs.size > 0) {
      const list = await this.api.getOk<{ items: VolumeAttachment[] }>(PATHS.volumeAttachments);
      for (const va of list.items) {
        const pv = va.spec.source.persistentVolumeName;
        if (pv !== undefined && pv !== null && this.#pvs.has(pv)) this.#vas.add(va.metadata.name);
      }
    }
    const vas = [...this.#vas];
    if (attacherRunning && vas.length > 0) {
      try {
        await this.deleteVas(vas, 60_000);
      } catch (err) {
        console.error(`cleanup of ${this.prefix}: ${err instanceof Error ? err.message : err}`);
      }
    }
    for (const va of this.#vas) await this.#forceDelete(`${PATHS.volumeAttachments}/${va}`);
    for (const pv of this.#pvs) await this.#forceDelete(`${PATHS.persistentVolumes}/${pv}`);
    for (const path of this.#extra) await this.api.deleteOk(path);
    this.#vas.clear();
    this.#pvs.clear();
    this.#pods.clear();
    this.#claims.clear();
    this.#extra.length = 0;
  }

  async #forceDelete(path: string): Promise<void> {
    const obj = await this.api.find<{ metadata: { finalizers?: string[] } }>(path);
    if (obj === undefined) return;
    if ((obj.metadata.finalizers ?? []).length > 0) {
      await this.api.patchOk(path, "merge", { metadata: { finalizers: null } });
    }
    await this.api.deleteOk(path);
  }
}

/** One line of our attacher's text log. */
export interface AttacherLogLine {
  /** Wall-clock time (ms since the epoch, local time zone, current year). */
  time: number;
  level: string;
  /** The process that wrote it (a restarted replica writes on with a new one). */
  pid: number;
  msg: string;
  /** The raw rest of the line (key="value" pairs). */
  rest: string;
}

const KLOG_LINE =
  /^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+(\d+) [^\]]*\] "((?:[^"\\]|\\.)*)"(.*)$/;

/** Parses klog text lines (our attacher's `--logging-format=text` output). */
export function parseAttacherLog(text: string, year = new Date().getFullYear()): AttacherLogLine[] {
  const out: AttacherLogLine[] = [];
  for (const line of text.split("\n")) {
    const m = KLOG_LINE.exec(line);
    if (m === null) continue;
    const [, level, mon, day, h, min, s, us, pid, msg, rest] = m;
    out.push({
      time: new Date(
        year,
        Number(mon) - 1,
        Number(day),
        Number(h),
        Number(min),
        Number(s),
        Math.floor(Number(us) / 1000),
      ).getTime(),
      level: level!,
      pid: Number(pid),
      msg: JSON.parse(`"${msg}"`),
      rest: rest ?? "",
    });
  }
  return out;
}

/** Waits until the process' log matches `pattern`; fails early when the process exits. */
export async function waitForLog(
  process: ManagedProcess,
  pattern: RegExp,
  timeoutMs = 60_000,
): Promise<void> {
  await waitUntil(`${process.spec.name} to log ${pattern}`, async () => {
    if (pattern.test(await process.output())) return true;
    if (process.exitStatus !== undefined) {
      throw new GiveUpError(
        `${process.spec.name} exited with ${process.exitStatus.code}:\n${await process.tail()}`,
      );
    }
    return false;
  }, timeoutMs);
}
