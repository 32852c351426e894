/**
 * The depth of an attacher's work queues, read from its Prometheus text (`/metrics` of
 * `--http-endpoint`): both attachers export client-go's `workqueue_depth{name=...}` for their
 * VolumeAttachment and PersistentVolume queues (`csi-attacher-va`, `csi-attacher-pv`), the Go
 * sidecar through `k8s.io/component-base/metrics/prometheus/workqueue`.
 *
 * @module
 */

/** The queues an attacher works through after it takes the Lease. */
export const ATTACHER_QUEUES = ["csi-attacher-va", "csi-attacher-pv"];

/** `workqueue_depth` by queue name, from Prometheus text exposition. */
export function queueDepths(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const m = /^workqueue_depth\{([^}]*)\}\s+(\S+)/.exec(line);
    if (m === null) continue;
    const name = /(?:^|,)name="([^"]*)"/.exec(m[1]!)?.[1];
    if (name !== undefined) out[name] = Number(m[2]);
  }
  return out;
}

/** True when every queue of {@link ATTACHER_QUEUES} is exported and empty. */
export function queuesEmpty(depths: Record<string, number>): boolean {
  return ATTACHER_QUEUES.every((q) => depths[q] === 0);
}
