/**
 * Is kube-controller-manager working right now? The Pod scenarios rely on its PV binder and its
 * attach/detach controller reacting to new objects within seconds, which it does not do for a
 * while after kube-apiserver restarts: every informer's reflector waits out client-go's backoff
 * before it lists and watches again (k8s.io/client-go tools/cache/reflector.go: 800 ms doubling
 * up to 30 s, jitter factor 1, so 30-60 s once capped; reset only after 2 min without a backoff),
 * and the restarts of scenarios 6 and 9, with the 429s of the throttled server in between, push
 * it to the cap: its PV and Pod informers came back only a minute or more later. Its `/healthz`
 * says `ok` all the while.
 *
 * So before a Pod scenario the suite runs a canary through the same path its Pods take, with a
 * driver of its own that no attacher serves (the suite plays that driver's attacher): a PV and a
 * PVC the binder must bind, a Pod on a canary Node for which the attach/detach controller must
 * create a VolumeAttachment, `status.attached` set by the suite, which the controller must record
 * in the Node's `status.volumesAttached`, and the Pod deleted, after which the controller must
 * delete the VolumeAttachment and clear the Node's list. Each of those needs a live informer
 * (PersistentVolumes, PersistentVolumeClaims, Pods, VolumeAttachments, and Nodes: in one run the
 * controller detached the canary only once its Node informer had listed again) and a working
 * controller.
 * Nothing of it is left behind, and neither the CSI driver nor an attacher is involved.
 *
 * @module
 */

import { controllerVaName, POD_NAMESPACE, sleep, uniqueVolumeName } from "./kit.ts";
import {
  node,
  PATHS,
  persistentVolume,
  persistentVolumeClaim,
  pod as podObject,
} from "./objects.ts";
import type { RawApi } from "./raw_api.ts";

/** The canary's CSI driver: a name no attacher of the suite serves. */
export const CANARY_DRIVER = "canary.e2e.example.com";
/** The canary's Node (no CSINode: the controller does not need one for a CSI PV). */
export const CANARY_NODE = "e2e-canary-node";
/**
 * The canary's deadline. An informer can wait out more than one capped backoff (30-60 s each) in a
 * row once kube-apiserver is back: every return of its list-and-watch (a list refused with 403
 * while the restarted server's RBAC caches sync, a resumed watch closed with "too old resource
 * version") is followed by another backoff until 2 min pass without one. 87 s were seen after scenarios 6, 8 and 9; three waits are 180 s.
 */
export const CANARY_TIMEOUT_MS = 180_000;

/** The API operations the canary uses (the suite's administrator client). */
export type CanaryApi = Pick<
  RawApi,
  "createOk" | "find" | "getOk" | "patchOk" | "deleteOk" | "request"
>;

/** Options of {@link runControllerCanary}. */
export interface CanaryOptions {
  /** Makes the canary's object names unique (one canary per number). */
  seq: number;
  /** Default {@link CANARY_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** kube-controller-manager's `/healthz` body, or an error when it does not answer. */
  healthz: () => Promise<string>;
  /** Where to read kube-controller-manager's log (named in the error). */
  logPath?: string;
  /** Polling interval, default 100 ms. */
  intervalMs?: number;
}

/** Seconds from the canary's start to each step. */
export interface CanaryTimes {
  healthz: number;
  bound: number;
  vaCreated: number;
  attached: number;
  detached: number;
}

/** Creates {@link CANARY_NODE} (once per cluster, before the first canary). */
export async function createCanaryNode(api: CanaryApi): Promise<void> {
  await api.createOk(PATHS.nodes, node(CANARY_NODE));
}

interface Named {
  metadata: { name: string };
}
interface ClaimView extends Named {
  status?: { phase?: string };
}
interface NodeView extends Named {
  status?: { volumesAttached?: { name: string }[] | null };
}
interface VaView extends Named {
  status?: { attached?: boolean };
}

/**
 * Runs the canary and resolves with the time each step took; rejects with the step that did not
 * happen within the deadline. Its objects are deleted in either case.
 */
export async function runControllerCanary(
  api: CanaryApi,
  options: CanaryOptions,
): Promise<CanaryTimes> {
  const timeoutMs = options.timeoutMs ?? CANARY_TIMEOUT_MS;
  const intervalMs = options.intervalMs ?? 100;
  const started = performance.now();
  const elapsed = () => (performance.now() - started) / 1000;
  const name = `e2e-canary-${options.seq}`;
  const volumeHandle = `canary-${options.seq}`;
  const unique = uniqueVolumeName(CANARY_DRIVER, volumeHandle);
  const vaName = await controllerVaName(volumeHandle, CANARY_DRIVER, CANARY_NODE);
  const podPath = `${PATHS.pods(POD_NAMESPACE)}/${name}`;
  const claimPath = `${PATHS.persistentVolumeClaims(POD_NAMESPACE)}/${name}`;
  const pvPath = `${PATHS.persistentVolumes}/${name}`;
  const vaPath = `${PATHS.volumeAttachments}/${vaName}`;
  const nodePath = `${PATHS.nodes}/${CANARY_NODE}`;

  /** Polls `probe` until true; on the deadline throws naming `what` and the last state. */
  const until = async (what: string, probe: () => Promise<boolean | string>) => {
    let last = "";
    for (;;) {
      try {
        const result = await probe();
        if (result === true) return elapsed();
        last = result === false ? "" : result;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      if (elapsed() * 1000 >= timeoutMs) {
        throw new Error(
          `kube-controller-manager is not working: ${what} did not happen within ` +
            `${timeoutMs / 1000} s${last === "" ? "" : ` (last: ${last})`}; its informers may ` +
            `still be backing off after kube-apiserver restarts` +
            (options.logPath === undefined ? "" : `, see ${options.logPath}`),
        );
      }
      await sleep(intervalMs);
    }
  };
  const volumesAttached = async () => {
    const obj = await api.getOk<NodeView>(nodePath);
    return (obj.status?.volumesAttached ?? []).map((v) => v.name);
  };

  try {
    const healthz = await until("/healthz answering ok", async () => {
      const body = await options.healthz();
      return body === "ok" || `/healthz: ${body.slice(0, 200)}`;
    });
    await api.createOk(
      PATHS.persistentVolumes,
      persistentVolume(name, CANARY_DRIVER, volumeHandle),
    );
    await api.createOk(
      PATHS.persistentVolumeClaims(POD_NAMESPACE),
      persistentVolumeClaim(name, POD_NAMESPACE, name),
    );
    const bound = await until(`the PV binder binding PVC ${name}`, async () => {
      const phase = (await api.getOk<ClaimView>(claimPath)).status?.phase;
      return phase === "Bound" || `phase ${phase}`;
    });
    await api.createOk(
      PATHS.pods(POD_NAMESPACE),
      podObject(name, POD_NAMESPACE, CANARY_NODE, [name]),
    );
    const vaCreated = await until(
      `the attach/detach controller creating VolumeAttachment ${vaName} for Pod ${name}`,
      async () => (await api.find<VaView>(vaPath)) !== undefined,
    );
    // What the canary driver's attacher would do.
    await api.patchOk(`${vaPath}/status`, "merge", { status: { attached: true } });
    const attached = await until(
      `the attach/detach controller listing ${unique} in Node ${CANARY_NODE}'s volumesAttached`,
      async () => {
        const names = await volumesAttached();
        return names.includes(unique) || `volumesAttached ${JSON.stringify(names)}`;
      },
    );
    await deleteNow(api, podPath);
    const detached = await until(
      `the attach/detach controller deleting VolumeAttachment ${vaName} after Pod ${name} went`,
      async () => {
        if ((await api.find<VaView>(vaPath)) !== undefined) return "the VolumeAttachment exists";
        const names = await volumesAttached();
        return names.length === 0 || `volumesAttached ${JSON.stringify(names)}`;
      },
    );
    return { healthz, bound, vaCreated, attached, detached };
  } finally {
    // Cleanup errors must not hide the canary's own.
    const cleanup = [
      () => deleteNow(api, podPath),
      () => api.deleteOk(claimPath),
      () => api.deleteOk(pvPath),
      // Only left when the controller did not detach; no finalizer is on it (no attacher saw it).
      () => api.deleteOk(vaPath),
    ];
    for (const step of cleanup) {
      try {
        await step();
      } catch (err) {
        console.error(`canary ${name} cleanup: ${err instanceof Error ? err.message : err}`);
      }
    }
  }
}

/** Deletes a Pod with grace period 0 (no kubelet would confirm a graceful deletion). */
async function deleteNow(api: CanaryApi, path: string): Promise<void> {
  const res = await api.request("DELETE", path, { body: { gracePeriodSeconds: 0 } });
  if (res.status !== 200 && res.status !== 202 && res.status !== 404) {
    throw new Error(`DELETE ${path}: HTTP ${res.status}: ${res.text.slice(0, 300)}`);
  }
}
