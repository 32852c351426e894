import assert from "node:assert/strict";
import { queueDepths, queuesEmpty } from "./queue_depth.ts";

Deno.test("queueDepths() reads workqueue_depth by name, as both attachers export it", () => {
  const text = [
    "# HELP workqueue_depth [ALPHA] Current depth of workqueue",
    "# TYPE workqueue_depth gauge",
    'workqueue_depth{name="csi-attacher-pv"} 0',
    'workqueue_depth{name="csi-attacher-va"} 1234',
    'workqueue_adds_total{name="csi-attacher-va"} 20001',
    'workqueue_depth{controller="x",name="other"} 2',
  ].join("\n");
  assert.deepEqual(queueDepths(text), {
    "csi-attacher-pv": 0,
    "csi-attacher-va": 1234,
    other: 2,
  });
  assert.equal(queuesEmpty(queueDepths(text)), false);
  assert.equal(
    queuesEmpty(queueDepths(text.replace("} 1234", "} 0"))),
    true,
  );
  assert.equal(queuesEmpty({ "csi-attacher-va": 0 }), false, "the PV queue not exported yet");
});
