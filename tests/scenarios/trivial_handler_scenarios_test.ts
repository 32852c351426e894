/**
 * The Go attacher's TestTrivialHandler scenarios (external-attacher
 * `pkg/controller/trivial_handler_test.go`), by their Go test names: the
 * trivial handler marks VolumeAttachments attached with one status patch and never calls the
 * driver.
 */

import assert from "node:assert/strict";
import type { Scenario } from "../../testkit/harness/scenario_harness.ts";
import { runScenario } from "../../testkit/harness/scenario_harness.ts";
import { TRIVIAL_ATT as ATT, va, vaStatusPatch, with_ } from "../../testkit/harness/fixtures.ts";

const scenarios: Scenario[] = [
  {
    name: "add -> successful write",
    handler: "trivial",
    addedVA: va(false),
    expectedActions: [ATT],
  },
  {
    name: "update -> successful write",
    handler: "trivial",
    updatedVA: va(false),
    expectedActions: [ATT],
  },
  {
    name: "unknown driver -> controller ignores",
    handler: "trivial",
    addedVA: with_(va(false), (o) => o.spec.attacher = "unknownDriver"),
    expectedActions: [],
  },
  {
    name: "failed write -> controller retries",
    handler: "trivial",
    addedVA: va(false),
    faults: [{ verb: "patch", resource: "volumeattachments", status: 403, times: 2 }],
    expectedActions: [ATT, ATT, ATT],
  },
  // Not in the Go table: markAsAttached(va, nil) there also clears leftovers of an earlier
  // attachment (metadata) and a saved error.
  {
    name: "leftover attachment metadata and error -> cleared with the write",
    handler: "trivial",
    addedVA: with_(va(false), (o) => {
      o.status = {
        attached: false,
        attachmentMetadata: { devicePath: "/dev/old" },
        attachError: { message: "old error", time: "2026-01-01T00:00:00Z" },
      };
    }),
    expectedActions: [
      vaStatusPatch({ status: { attachError: null, attached: true, attachmentMetadata: null } }),
    ],
  },
];

for (const s of scenarios) {
  Deno.test(`trivial handler: ${s.name}`, async () => {
    const result = await runScenario(s);
    assert.deepEqual(result.csi.callsOf("ControllerPublishVolume"), []);
    assert.deepEqual(result.csi.callsOf("ControllerUnpublishVolume"), []);
  });
}
