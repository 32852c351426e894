import assert from "node:assert/strict";
import { addFailure, addSlowness, noFaults, withFaults } from "./driver_faults.ts";
import { CsiStatusError } from "./server.ts";

Deno.test("addFailure() and addSlowness() read call:code and call:duration", () => {
  let faults = addFailure(noFaults(), "publish:NotFound");
  faults = addFailure(faults, "unpublish:13");
  faults = addSlowness(faults, "list-volumes:1.5s");
  assert.deepEqual(faults, {
    fail: { publish: 5, unpublish: 13 },
    slowMs: { "list-volumes": 1500 },
  });
  assert.throws(() => addFailure(noFaults(), "publish:OK"), /not a gRPC error code: "OK"/);
  assert.throws(() => addFailure(noFaults(), "attach:NotFound"), /unknown call "attach"/);
  assert.throws(() => addFailure(noFaults(), "publish"), /expected <call>:<value>/);
  assert.throws(() => addSlowness(noFaults(), "publish:soon"), /invalid duration/);
});

Deno.test("withFaults() fails without calling the handler, after the delay", async () => {
  const calls: string[] = [];
  const slept: number[] = [];
  const handlers = withFaults(
    {
      controllerPublishVolume: () => {
        calls.push("publish");
        return Promise.resolve({ publishContext: {} });
      },
      controllerUnpublishVolume: () => {
        calls.push("unpublish");
        return Promise.resolve();
      },
    },
    addSlowness(addFailure(noFaults(), "publish:FailedPrecondition"), "publish:2s"),
    (ms) => {
      slept.push(ms);
      return Promise.resolve();
    },
  );
  const request = {
    volumeId: "v",
    nodeId: "n",
    volumeCapability: null,
    readonly: false,
    secrets: {},
    volumeContext: {},
  };
  await assert.rejects(handlers.controllerPublishVolume!(request), (err: unknown) => {
    assert.ok(err instanceof CsiStatusError);
    assert.equal(err.code, 9);
    assert.equal(err.message, "fault injected with --fail=publish:FailedPrecondition");
    return true;
  });
  await handlers.controllerUnpublishVolume!({ volumeId: "v", nodeId: "n", secrets: {} });
  assert.deepEqual(calls, ["unpublish"]);
  assert.deepEqual(slept, [2000]);
});
