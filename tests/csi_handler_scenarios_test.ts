/**
 * The Go attacher's TestCSIHandler scenarios (REFERENCE §3.3), by their reference names.
 */

import type { Scenario } from "./scenario_harness.ts";
import { runScenario } from "./scenario_harness.ts";
import { ADD_FIN_ANN, ANN, ATT, csiNode, FIN, pv, va, vaStatusPatch } from "./fixtures.ts";

const publish = (expect: Record<string, unknown> = {}, respond: object = {}) => ({
  method: "ControllerPublishVolume" as const,
  expect: { volumeId: "handle1", nodeId: "nodeID1", readonly: false, ...expect },
  respond,
});

const scenarios: Scenario[] = [
  {
    name: "VolumeAttachment added -> successful attachment",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [ADD_FIN_ANN, ATT],
    expectedCsiCalls: [publish()],
  },
  {
    name: "already attached volume -> ignored",
    initialObjects: [pv(), csiNode()],
    addedVA: va(true, FIN, ANN),
    expectedActions: [],
  },
  {
    name: "VolumeAttachment added -> successful attachment incl. metadata",
    initialObjects: [pv(), csiNode()],
    addedVA: va(false),
    expectedActions: [
      ADD_FIN_ANN,
      vaStatusPatch({ status: { attached: true, attachmentMetadata: { foo: "bar" } } }),
    ],
    expectedCsiCalls: [publish({}, { publishContext: { foo: "bar" } })],
  },
];

for (const s of scenarios) {
  Deno.test(`CSI handler: ${s.name}`, async () => {
    await runScenario(s);
  });
}
