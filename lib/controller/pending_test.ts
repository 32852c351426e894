import assert from "node:assert/strict";
import type { VolumeAttachment } from "../kube/types.ts";
import { finalizerName } from "./names.ts";
import { pendingVolumeAttachments } from "./pending.ts";

const DRIVER = "csi.example.com";
const NOW = Date.parse("2026-01-01T01:00:00Z");

function va(
  name: string,
  fields: {
    attacher?: string;
    created?: string;
    deleted?: string;
    attached?: boolean;
    finalizer?: boolean;
  },
): VolumeAttachment {
  return {
    metadata: {
      name,
      creationTimestamp: fields.created ?? "2026-01-01T00:00:00Z",
      deletionTimestamp: fields.deleted,
      finalizers: fields.finalizer ? [finalizerName(DRIVER)] : undefined,
    },
    spec: {
      attacher: fields.attacher ?? DRIVER,
      nodeName: "n",
      source: { persistentVolumeName: name },
    },
    status: { attached: fields.attached ?? false },
  };
}

Deno.test("pendingVolumeAttachments() counts unattached and undetached VAs of the driver, with the oldest age", () => {
  const pending = pendingVolumeAttachments([
    va("new", { created: "2026-01-01T00:59:30Z" }),
    va("older", { created: "2026-01-01T00:58:00Z" }),
    va("attached", { attached: true, finalizer: true }),
    va("other-driver", { attacher: "other", created: "2026-01-01T00:00:00Z" }),
    va("detaching", { deleted: "2026-01-01T00:50:00Z", attached: true, finalizer: true }),
    va("detaching-2", { deleted: "2026-01-01T00:59:59Z", attached: true, finalizer: true }),
    va("detached", { deleted: "2026-01-01T00:00:00Z", finalizer: false }),
  ], { driverName: DRIVER, nowMs: NOW });
  assert.deepEqual(pending, {
    attach: { count: 2, oldestSeconds: 120 },
    detach: { count: 2, oldestSeconds: 600 },
  });
});

Deno.test("pendingVolumeAttachments() is all zero for an empty cache", () => {
  assert.deepEqual(pendingVolumeAttachments([], { driverName: DRIVER, nowMs: NOW }), {
    attach: { count: 0, oldestSeconds: 0 },
    detach: { count: 0, oldestSeconds: 0 },
  });
});
