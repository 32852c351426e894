/**
 * The status write (`status_write.ts`): the merge patch of a change against the cached status,
 * as Go's `createMergePatch`, with the uid guard; sent to the status subresource.
 */

import assert from "node:assert/strict";
import type { VolumeAttachment } from "../kube/types.ts";
import { statusPatch, withUid, writeStatus } from "./status_write.ts";
import { FakeHandlerKube } from "../../testkit/harness/handler_fixtures.ts";

Deno.test("withUid: adds metadata.uid beside the metadata the patch has", () => {
  assert.deepEqual(withUid({ metadata: { finalizers: null } }, "u1"), {
    metadata: { finalizers: null, uid: "u1" },
  });
  assert.deepEqual(withUid({ status: { attached: true } }, "u1"), {
    status: { attached: true },
    metadata: { uid: "u1" },
  });
});

Deno.test("withUid: an unknown uid leaves the patch as it is", () => {
  const patch = { status: { attached: true } };
  assert.equal(withUid(patch, undefined), patch);
  assert.equal(withUid(patch, ""), patch);
});

Deno.test("statusPatch: only what changes; a field set undefined is nulled only when present", () => {
  const set = { attached: true, attachmentMetadata: undefined, attachError: undefined };
  assert.deepEqual(statusPatch(undefined, { set }, undefined), { status: { attached: true } });
  assert.deepEqual(statusPatch({ attached: false }, { set }, undefined), {
    status: { attached: true },
  });
  assert.deepEqual(
    statusPatch(
      { attached: false, attachmentMetadata: { a: "b" }, attachError: { message: "x" } },
      { set },
      "u1",
    ),
    {
      status: { attached: true, attachmentMetadata: null, attachError: null },
      metadata: { uid: "u1" },
    },
  );
});

Deno.test("statusPatch: a cleared field is nulled whatever the cached status shows", () => {
  assert.deepEqual(
    statusPatch({ attached: true }, { set: { attached: true }, clear: ["attachError"] }, undefined),
    { status: { attachError: null } },
  );
});

Deno.test("statusPatch: a new error replaces the old one field by field", () => {
  assert.deepEqual(
    statusPatch(
      { attached: false, detachError: { message: "old", time: "t0" } },
      { set: { detachError: { message: "new", time: "t1" } } },
      undefined,
    ),
    { status: { detachError: { message: "new", time: "t1" } } },
  );
});

Deno.test("writeStatus: a merge patch of the status subresource, by name; the stored VA back", async () => {
  const kube = new FakeHandlerKube();
  const stored: VolumeAttachment = {
    metadata: { name: "va1", uid: "u1", resourceVersion: "9" },
    spec: { attacher: "d", nodeName: "n", source: {} },
    status: { attached: true },
  };
  kube.objects.set("volumeattachments/va1", stored);
  const va: VolumeAttachment = { ...stored, status: { attached: false } };
  const written = await writeStatus(kube, va, { set: { attached: true } }, "u1");
  assert.deepEqual(written, stored);
  assert.deepEqual(kube.calls.map((c) => [c.what, c.patch]), [[
    "patch volumeattachments/status va1",
    { type: "merge", body: { status: { attached: true }, metadata: { uid: "u1" } } },
  ]]);
});
