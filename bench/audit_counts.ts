/**
 * Counting the attacher's requests from a kube-apiserver JSON audit log (`--audit-log-format=json`,
 * one record per line).
 *
 * @module
 */

import { bump, emptyCounts, type RequestCounts, requestKey } from "./request_counts.ts";

/** One record of the API server's JSON audit log, as far as it is read here. */
interface AuditRecord {
  stage?: string;
  verb?: string;
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string };
}

/**
 * Counts audit records: each request once (its `ResponseComplete` record; a watch by its
 * `ResponseStarted` record, as it completes only when it ends).
 */
export function countAuditRecords(lines: readonly string[]): RequestCounts {
  const out = emptyCounts();
  for (const line of lines) {
    if (line.trim() === "") continue;
    const r = JSON.parse(line) as AuditRecord;
    const watch = r.verb === "watch";
    if (r.stage !== (watch ? "ResponseStarted" : "ResponseComplete")) continue;
    bump(
      out.byKey,
      requestKey(r.verb ?? "", r.objectRef?.resource ?? "", r.objectRef?.subresource ?? ""),
    );
    bump(out.userAgents, r.userAgent ?? "");
  }
  return out;
}
