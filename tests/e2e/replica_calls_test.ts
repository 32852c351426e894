import assert from "node:assert/strict";
import { PUBLISH, UNPUBLISH } from "./driver_log.ts";
import { attributeCalls, loggedCalls, unsentCalls } from "./replica_calls.ts";

const OURS = [
  'I1128 05:04:10.305000    6963 attacher] "GRPC call" method="/csi.v1.Controller/ControllerPublishVolume" request="{\\"volumeId\\":\\"4\\",\\"nodeId\\":\\"n\\",\\"readonly\\":false}"',
  'I1128 05:04:10.306000    6963 attacher] "GRPC call" method="/csi.v1.Identity/Probe" request="{}"',
  'I1128 05:04:11.000000    6963 attacher] "GRPC call" method="/csi.v1.Controller/ControllerUnpublishVolume" request="{\\"volumeId\\":\\"4\\",\\"nodeId\\":\\"n\\"}"',
  'I1128 05:04:11.001000    6963 attacher] "GRPC error" method="/csi.v1.Controller/ControllerUnpublishVolume" err="request not sent: this replica\'s lease could have passed to another"',
].join("\n");
const GO =
  'I1128 05:04:12.500000       1 connection.go:264] "GRPC call" VolumeAttachment="va" method="/csi.v1.Controller/ControllerPublishVolume" request="{\\"node_id\\":\\"n\\",\\"volume_id\\":\\"5\\"}"';

Deno.test("loggedCalls() reads ours' and the Go sidecar's GRPC call lines", () => {
  const year = new Date().getFullYear();
  const ours = loggedCalls("a", OURS);
  assert.deepEqual(ours.map((c) => [c.method, c.volumeId, c.nodeId]), [
    [PUBLISH, "4", "n"],
    [UNPUBLISH, "4", "n"],
  ]);
  assert.equal(ours[0]!.time, new Date(year, 10, 28, 5, 4, 10, 305).getTime());
  assert.deepEqual(loggedCalls("go", GO).map((c) => [c.replica, c.volumeId]), [["go", "5"]]);
});

Deno.test("unsentCalls() finds the calls the fence refused", () => {
  assert.equal(unsentCalls(OURS).length, 1);
  assert.deepEqual(unsentCalls(GO), []);
});

Deno.test("attributeCalls() gives each served call to the latest logger before it", () => {
  const call = (time: number, volume: string) => ({
    time,
    completed: time,
    method: PUBLISH,
    request: { volume_id: volume, node_id: "n" },
    response: {},
    error: "",
  });
  const logged = (replica: string, time: number, volume: string) => ({
    replica,
    time,
    method: PUBLISH,
    volumeId: volume,
    nodeId: "n",
  });
  // a logged v1 at 100 and was stopped before sending; b logged it at 200, served at 201;
  // a was resumed and sent it at 900.
  const out = attributeCalls(
    [call(201, "v1"), call(900, "v1"), call(950, "v2")],
    [logged("a", 100, "v1"), logged("b", 200, "v1")],
  );
  assert.deepEqual(out.map((c) => c.logged?.replica), ["b", "a", undefined]);
});
