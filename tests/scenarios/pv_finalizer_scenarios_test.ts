/**
 * The PersistentVolume finalizer in the Go attacher's TestCSIHandler scenarios (external-attacher
 * `pkg/controller/csi_handler_test.go`), by their Go test names: removed once no
 * VolumeAttachment names the PV being deleted, kept otherwise, retried when the patch fails.
 *
 * Differences from the Go lists, all because our fakes are real where Go's were not:
 * - The fake CSI driver is a real gRPC server, so a driver error always has a gRPC code: the Go
 *   fake's plain `mock error` arrives as `rpc error: code = Unknown desc = mock error`, and a
 *   timeout as `rpc error: code = DeadlineExceeded desc = context deadline exceeded`.
 * - A 403 on a PV reads `persistentvolumes "pv1" is forbidden: Mock error` as the real server
 *   words it; the Go reactor built it with the singular `persistentvolume`.
 * - Removing the last finalizer of a VA being deleted deletes it, so the following status patch
 *   gets 404 (the handler counts that as success; the request is still recorded).
 * - `secrets` and `volumeContext` are proto3 maps: an empty map and no map are the same on the
 *   wire, so the "empty secrets" rows compare `{}`.
 */

import assert from "node:assert/strict";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import {
  deleted,
  FIN,
  gcePdPv,
  pv,
  pvRemoveFin,
  va,
  with_,
} from "../../testkit/harness/fixtures.ts";
import type { PersistentVolume } from "../../lib/kube/types.ts";

const scenarios: Scenario[] = [
  {
    name: "VA deleted -> PV finalizer removed",
    initialObjects: [deleted(pv())],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "VA deleted -> PV finalizer removed (GCE PD PV)",
    initialObjects: [deleted(gcePdPv())],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "VA deleted -> PV finalizer not removed",
    initialObjects: [deleted(pv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "VA deleted -> PV finalizer not removed (GCE PD PV)",
    initialObjects: [deleted(gcePdPv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "PV updated -> PV finalizer removed",
    updatedPV: deleted(pv()),
    expectedActions: [pvRemoveFin(0)],
  },
  {
    name: "PV finalizer removed -> other finalizers preserved",
    initialObjects: [deleted(pv([FIN, "foo/bar", "bar/baz"]))],
    deletedVA: va(false),
    expectedActions: [pvRemoveFin(0)],
    check: ({ server }) => {
      const stored = server.get<PersistentVolume>("persistentvolumes", "pv1");
      assert.deepEqual(stored.metadata.finalizers, ["foo/bar", "bar/baz"]);
    },
  },
  {
    name: "finalizer removal fails -> controller retries",
    initialObjects: [deleted(pv())],
    deletedVA: va(false),
    faults: [{
      verb: "patch",
      resource: "persistentvolumes",
      status: 403,
      message: "mock error",
      times: 2,
    }],
    expectedActions: [pvRemoveFin(0), pvRemoveFin(0), pvRemoveFin(0)],
  },
  {
    name: "no PV finalizer -> ignored",
    initialObjects: [deleted(pv(null))],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "no deletion timestamp -> ignored",
    initialObjects: [pv(null)],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "VA exists -> ignored",
    initialObjects: [deleted(pv()), va(false)],
    deletedVA: va(false),
    expectedActions: [],
  },
  {
    name: "PV created by other CSI drivers or in-tree provisioners -> ignored",
    updatedPV: with_(pv(null), (o) => o.spec.csi!.driver = "dummy"),
    expectedActions: [],
  },
];

for (const s of scenarios) {
  Deno.test(`CSI handler: ${s.name}`, async () => {
    await runScenario(s);
  });
}
