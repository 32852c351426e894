import assert from "node:assert/strict";
import {
  countRepeatedUnpublishes,
  findRepublishes,
  republishesByVolume,
} from "./publish_analysis.ts";

function line(time: string, msg: string, fields: string): string {
  return `I1121 ${time}   4242 attacher] "${msg}" ${fields}`;
}

Deno.test("findRepublishes() names the cause of each repeated ControllerPublishVolume", () => {
  const va1 = 'volumeAttachment="s3-va1"';
  const va2 = 'volumeAttachment="s3-va2"';
  const a = [
    line("10:00:00.000000", "Calling ControllerPublishVolume", `${va1} volumeHandle="7"`),
    line("10:00:00.010000", "Fully attached", va1),
    line("10:00:00.010000", "Calling ControllerPublishVolume", `${va1} volumeHandle="7"`),
    line("10:00:01.000000", "Calling ControllerPublishVolume", `${va2} volumeHandle="8"`),
    line(
      "10:00:01.100000",
      "Error processing VolumeAttachment, will retry",
      `err="failed to mark as attached: connect ECONNREFUSED" ${va2}`,
    ),
    line("10:00:02.000000", "Calling ControllerPublishVolume", `${va2} volumeHandle="8"`),
    line(
      "10:00:03.000000",
      "Calling ControllerPublishVolume",
      'volumeAttachment="other" volumeHandle="9"',
    ),
  ].join("\n");
  const b = [
    line("10:00:05.000000", "Calling ControllerPublishVolume", `${va2} volumeHandle="8"`),
    line(
      "10:00:05.100000",
      "Driver's published state differs from VolumeAttachment, requeueing",
      va2,
    ),
    line("10:00:06.000000", "Calling ControllerPublishVolume", `${va2} volumeHandle="8"`),
  ].join("\n");
  const found = findRepublishes([{ replica: "a", text: a }, { replica: "b", text: b }], "s3-");
  assert.deepEqual(found.map((r) => [r.volumeAttachment, r.volumeHandle, r.cause]), [
    ["s3-va1", "7", "stale-cache"],
    ["s3-va2", "8", "status-write-failed"],
    ["s3-va2", "8", "hand-over"],
    ["s3-va2", "8", "reconcile-forced"],
  ]);
  assert.deepEqual([...republishesByVolume(found)], [["7", 1], ["8", 3]]);
});

Deno.test("findRepublishes() reads the Go csi-attacher's gRPC call lines", () => {
  const go = [
    'I1122 00:04:15.166104    6589 connection.go:264] "GRPC call" VolumeAttachment="s3-va17" ' +
    'method="/csi.v1.Controller/ControllerPublishVolume" request="{\\"volume_id\\":\\"22\\"}"',
    'I1122 00:04:16.966375    6589 csi_handler.go:282] "Fully attached" VolumeAttachment="s3-va17"',
    'I1122 00:04:16.966534    6589 connection.go:264] "GRPC call" VolumeAttachment="s3-va17" ' +
    'method="/csi.v1.Controller/ControllerPublishVolume" request="{\\"volume_id\\":\\"22\\"}"',
  ].join("\n");
  const found = findRepublishes([{ replica: "go", text: go }]);
  assert.deepEqual(found.map((r) => [r.volumeAttachment, r.volumeHandle, r.cause]), [
    ["s3-va17", "22", "stale-cache"],
  ]);
});

Deno.test("countRepeatedUnpublishes() counts the unpublish calls after each VA's first, over replicas", () => {
  const call = (time: string, va: string) =>
    line(time, "Calling ControllerUnpublishVolume", `volumeAttachment="${va}" volumeHandle="7"`);
  const a = [
    call("10:00:00.000000", "s2-va1"),
    call("10:00:00.100000", "s2-va2"),
    call("10:00:01.000000", "s2-va2"),
    call("10:00:01.000000", "s3-va1"),
  ].join("\n");
  const b = call("10:00:02.000000", "s2-va1");
  assert.equal(countRepeatedUnpublishes([{ replica: "a", text: a }], "s2-"), 1);
  assert.equal(
    countRepeatedUnpublishes([{ replica: "a", text: a }, { replica: "b", text: b }], "s2-"),
    2,
  );
  assert.equal(countRepeatedUnpublishes([{ replica: "a", text: a }]), 1, "no prefix: all VAs");
});
