/**
 * Proof that the RBAC manifest is sufficient: the API server's audit log of the attacher's user
 * must show no request refused with 403 (except those a scenario provokes on purpose), and the
 * attacher must not use verbs the Go attacher does not use.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { AuditEvent, LocalCluster } from "./cluster.ts";

/** Options of {@link checkRbacSufficient}. */
export interface RbacCheckOptions {
  /** Request URIs whose 403 answers are expected (e.g. secrets before access was granted). */
  allowForbidden: RegExp[];
  /** Print the verbs and resources used. Default true. */
  print?: boolean;
  /**
   * Times (ms since the epoch) when the API server was starting: its RBAC caches are not synced
   * yet and it answers 403 to everyone, which is not the manifest's fault.
   */
  startWindows?: { startedAt: number; readyAt: number }[];
}

/**
 * Reads the audit log and fails on an unexpected 403 or on an `update` (PUT) of a
 * VolumeAttachment or PersistentVolume.
 */
export async function checkRbacSufficient(
  cluster: LocalCluster,
  options: RbacCheckOptions,
): Promise<void> {
  const events = (await cluster.auditEvents()).filter((e) =>
    e.stage === "ResponseComplete" || e.stage === "ResponseStarted"
  );
  assert.ok(events.length > 0, "the audit log has the attacher's requests");
  const starting = (e: AuditEvent) => {
    const at = Date.parse(e.requestReceivedTimestamp ?? "");
    return (options.startWindows ?? []).some((w) => at >= w.startedAt && at <= w.readyAt);
  };
  const refused = events.filter((e) => e.responseStatus?.code === 403);
  const duringStart = refused.filter(starting);
  const forbidden = refused.filter((e) =>
    !starting(e) && !options.allowForbidden.some((re) => re.test(e.requestURI))
  ).map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus?.message ?? ""}`);
  if (duringStart.length > 0 && (options.print ?? true)) {
    console.log(`    ${duringStart.length} request(s) refused while the API server was starting`);
  }
  const used = new Map<string, number>();
  for (const e of events) {
    const ref = e.objectRef;
    const resource = ref?.subresource ? `${ref.resource}/${ref.subresource}` : ref?.resource ?? "";
    const key = `${e.verb} ${resource || e.requestURI}`;
    used.set(key, (used.get(key) ?? 0) + 1);
  }
  if (options.print ?? true) {
    const lines = [...used.entries()].sort().map(([k, n]) => `${k} ×${n}`);
    console.log(`    requests of the attacher's user: ${lines.join("; ")}`);
  }
  assert.deepEqual([...new Set(forbidden)], [], "requests refused by RBAC");
  const updates = [...used.keys()].filter((k) =>
    /^update (volumeattachments|persistentvolumes)/.test(k)
  );
  assert.deepEqual(updates, [], "update (PUT) of VolumeAttachments or PersistentVolumes");
}
