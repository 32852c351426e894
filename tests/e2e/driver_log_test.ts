import assert from "node:assert/strict";
import { countByVolume, parseDriverCalls, PUBLISH, UNPUBLISH } from "./driver_log.ts";

const LOG = [
  'I1121 23:42:16.557018   31296 main.go:213] serving CSI driver "x" on /tmp/s',
  'I1121 23:42:51.249601   31296 driver.go:245] gRPCCall: {"Method":"/csi.v1.Controller/ControllerPublishVolume","Request":{"volume_id":"50","node_id":"n"},"Response":{"publish_context":{"device":"/dev/mock"}},"Error":"","FullError":null}',
  'I1121 23:42:52.000000   31296 driver.go:245] gRPCCall: {"Method":"/csi.v1.Controller/ControllerPublishVolume","Request":{"volume_id":"50","node_id":"m"},"Response":null,"Error":"rpc error: code = NotFound desc = Not matching Node ID m to Mock Node ID n","FullError":{}}',
  'I1121 23:42:53.248361   31296 driver.go:245] gRPCCall: {"Method":"/csi.v1.Controller/ControllerUnpublishVolume","Request":{"volume_id":"50","node_id":"n"},"Response":{},"Error":"","FullError":null}',
].join("\n");

Deno.test("parseDriverCalls() reads the mock driver's call lines with their times", () => {
  const calls = parseDriverCalls(LOG, 2026);
  assert.equal(calls.length, 3);
  assert.equal(calls[0]!.method, PUBLISH);
  assert.deepEqual(calls[0]!.request, { volume_id: "50", node_id: "n" });
  assert.equal(calls[0]!.time, new Date(2026, 10, 21, 23, 42, 51, 249).getTime());
  assert.match(calls[1]!.error, /NotFound/);
});

Deno.test("parseDriverCalls() orders calls by their arrival when the line has ReceivedMs", () => {
  const arrived = new Date(2026, 10, 21, 23, 42, 40, 0).getTime();
  const text = LOG + "\n" +
    'I1121 23:42:54.000000   31296 main.go:300] gRPCCall: {"Method":"/csi.v1.Controller/ControllerPublishVolume","Request":{"volume_id":"51","node_id":"n"},"Response":{},"Error":"","FullError":null,"ReceivedMs":' +
    arrived + "}";
  const calls = parseDriverCalls(text, 2026);
  assert.equal(calls.length, 4);
  assert.equal(calls[0]!.request.volume_id, "51");
  assert.equal(calls[0]!.time, arrived);
  assert.equal(calls[0]!.completed, new Date(2026, 10, 21, 23, 42, 54, 0).getTime());
  assert.equal(calls[1]!.completed, calls[1]!.time);
});

Deno.test("countByVolume() counts successful calls, optionally since a time", () => {
  const calls = parseDriverCalls(LOG, 2026);
  assert.deepEqual([...countByVolume(calls, PUBLISH)], [["50", 1]]);
  assert.deepEqual([...countByVolume(calls, PUBLISH, { successOnly: false })], [["50", 2]]);
  assert.deepEqual([...countByVolume(calls, UNPUBLISH, { since: calls[2]!.time + 1 })], []);
});
