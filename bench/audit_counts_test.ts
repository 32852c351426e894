import assert from "node:assert/strict";
import { countAuditRecords } from "./audit_counts.ts";

function record(stage: string, verb: string, resource: string, subresource?: string): string {
  return JSON.stringify({
    kind: "Event",
    stage,
    verb,
    userAgent: "csi-attacher/v4.13.0",
    objectRef: { resource, subresource, name: "x", apiGroup: "storage.k8s.io" },
  });
}

Deno.test("countAuditRecords() counts each request once, watches when they start", () => {
  const counts = countAuditRecords([
    record("ResponseComplete", "patch", "volumeattachments", "status"),
    record("ResponseComplete", "patch", "volumeattachments"),
    record("ResponseComplete", "patch", "persistentvolumes"),
    record("ResponseStarted", "watch", "volumeattachments"),
    record("ResponseComplete", "watch", "volumeattachments"), // the same watch, ending
    record("ResponseComplete", "list", "csinodes"),
    "",
  ]);
  assert.deepEqual(counts.byKey, {
    "patch volumeattachments/status": 1,
    "patch volumeattachments": 1,
    "patch persistentvolumes": 1,
    "watch volumeattachments": 1,
    "list csinodes": 1,
  });
  assert.deepEqual(counts.userAgents, { "csi-attacher/v4.13.0": 5 });
});
