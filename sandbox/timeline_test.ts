import assert from "node:assert/strict";
import {
  describeApiCall,
  describeCsiCall,
  showValue,
  summarizePatch,
  Timeline,
} from "./timeline.ts";

Deno.test("summarizePatch() lists JSON patch operations with their values", () => {
  assert.equal(
    summarizePatch({
      type: "json",
      body: [
        { op: "test", path: "/metadata/finalizers/0", value: "external-attacher/x" },
        { op: "remove", path: "/metadata/finalizers/0" },
      ],
    }),
    "json: test /metadata/finalizers/0=external-attacher/x; remove /metadata/finalizers/0",
  );
  assert.equal(
    summarizePatch({ type: "json", body: [{ op: "test", path: "/a", value: null }] }),
    "json: test /a=null",
  );
});

Deno.test("summarizePatch() flattens a merge patch to two levels and keeps nulls", () => {
  assert.equal(
    summarizePatch({
      type: "merge",
      body: {
        status: { attached: true, attachmentMetadata: { devicePath: "/dev/x" }, attachError: null },
      },
    }),
    'merge: status.attached=true, status.attachmentMetadata={"devicePath":"/dev/x"}, status.attachError=null',
  );
  assert.equal(summarizePatch({ type: "merge", body: {} }), "merge: {} (no change)");
  assert.equal(
    summarizePatch({ type: "merge", body: { metadata: { finalizers: null } } }),
    "merge: metadata.finalizers=null",
  );
});

Deno.test("showValue() cuts long values", () => {
  const shown = showValue("x".repeat(500));
  assert.equal(shown.length, 120);
  assert.ok(shown.endsWith("…"));
  assert.equal(showValue({ a: 1 }), '{"a":1}');
});

Deno.test("describeApiCall() skips lists and shows failures with code and message", () => {
  assert.equal(
    describeApiCall({
      verb: "list",
      resource: "volumeattachments",
      namespace: "",
      name: "",
      subresource: "",
      outcome: { ok: true },
    }),
    undefined,
  );
  assert.equal(
    describeApiCall({
      verb: "get",
      resource: "secrets",
      namespace: "ns",
      name: "s1",
      subresource: "",
      outcome: { ok: false, code: 403, reason: "Forbidden", message: "no" },
    }),
    "get secrets/ns/s1  → 403 Forbidden: no",
  );
  assert.equal(
    describeApiCall({
      verb: "patch",
      resource: "volumeattachments",
      namespace: "",
      name: "va-1",
      subresource: "status",
      patch: { type: "merge", body: { status: { attached: false } } },
      outcome: { ok: false, code: 404, reason: "NotFound", message: "gone" },
    }),
    "patch volumeattachments/va-1/status  merge: status.attached=false  → 404 NotFound: gone " +
      "(the object is gone: counts as detached)",
  );
});

Deno.test("describeCsiCall() shows the request fields, the capability and the outcome", () => {
  assert.equal(
    describeCsiCall(
      "ControllerPublishVolume",
      {
        volumeId: "v1",
        nodeId: "n1",
        volumeCapability: {
          mount: { fsType: "ext4", mountFlags: [] },
          accessMode: { mode: "SINGLE_NODE_WRITER" },
        },
        readonly: false,
        secrets: "***stripped***",
        volumeContext: {},
      },
      {
        kind: "response",
        method: "ControllerPublishVolume",
        response: { publishContext: { devicePath: "/dev/x" } },
      },
    ),
    "ControllerPublishVolume(volumeId=v1, nodeId=n1, capability=mount(fsType=ext4) " +
      'SINGLE_NODE_WRITER, readonly=false, secrets=***stripped***) → OK publishContext={"devicePath":"/dev/x"}',
  );
  assert.equal(
    describeCsiCall("ControllerUnpublishVolume", { volumeId: "v1" }, {
      kind: "error",
      method: "ControllerUnpublishVolume",
      error: "rpc error: code = Internal desc = boom",
    }),
    "ControllerUnpublishVolume(volumeId=v1) → rpc error: code = Internal desc = boom",
  );
  assert.equal(
    describeCsiCall("GetPluginCapabilities", {}, {
      kind: "response",
      method: "GetPluginCapabilities",
      response: { capabilities: [{ service: { type: "CONTROLLER_SERVICE" } }] },
    }),
    "GetPluginCapabilities() → OK CONTROLLER_SERVICE",
  );
});

Deno.test("Timeline pairs CSI responses with their requests, numbers lines, hides ListVolumes", () => {
  const lines: string[] = [];
  const timeline = new Timeline({ write: (line) => lines.push(line) });
  timeline.csi({ kind: "call", method: "ListVolumes", request: {} });
  timeline.csi({ kind: "call", method: "Probe", request: {} });
  timeline.csi({ kind: "response", method: "ListVolumes", response: {} });
  timeline.line("sandbox", "create x");
  timeline.csi({ kind: "response", method: "Probe", response: { ready: { value: true } } });
  timeline.api({
    verb: "create",
    resource: "leases",
    namespace: "ns",
    name: "l",
    subresource: "",
    outcome: { ok: true },
  });
  assert.deepEqual(lines, [
    "  1  sandbox  create x",
    "  2  CSI      Probe() → OK ready=true",
    "  3  API      create leases/ns/l",
  ]);
  assert.equal(timeline.length, 3);
});
