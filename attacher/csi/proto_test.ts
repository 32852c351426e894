import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import protobuf from "protobufjs";
import {
  CSI_CLIENT_LOADER_OPTIONS,
  CSI_SECRET_FIELDS,
  csiDescriptor,
  isSecretField,
  loadCsiProto,
} from "./proto.ts";

/**
 * Messages encoded by Go with github.com/container-storage-interface/spec v1.12.0
 * (lib/go/csi, `proto.MarshalOptions{Deterministic: true}`), as hex. Decoding them with our
 * descriptor proves field numbers and types match the real spec.
 */
const GO_ENCODED = {
  publishMount:
    "0a05766f6c2d3112066e6f64652d311a1f1a02080712190a04657874341202726f12076e6f6174696d651a04313030" +
    "3020012a120a0870617373776f72641206733363723374320c0a04706f6f6c120466617374",
  publishBlock: "0a05766f6c2d3212066e6f64652d321a061a0208060a00",
  unpublish: "0a05766f6c2d3112066e6f64652d311a060a016b120176",
  publishResponse: "0a140a0a6465766963655061746812062f6465762f78",
  listRequest: "080512027431",
  listResponse:
    "0a370a150880808080041205766f6c2d311a060a0161120162121e0a066e6f64652d310a066e6f64652d32120c08" +
    "011208646567726164656412046e657874",
  probeFalse: "0a00",
  pluginInfo: "0a126578616d706c652e6373692e6b38732e696f1205312e302e301a060a016d12016e",
  pluginCaps: "0a040a0208010a0412020801",
  controllerCaps: "0a040a0208020a040a02080a0a040a02080f",
};

const proto = loadCsiProto(CSI_CLIENT_LOADER_OPTIONS);
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

function decodeRequest(service: "Identity" | "Controller", method: string, h: string): unknown {
  return proto.method(service, method).definition.requestDeserialize(Buffer.from(h, "hex"));
}
function decodeResponse(service: "Identity" | "Controller", method: string, h: string): unknown {
  return proto.method(service, method).definition.responseDeserialize(Buffer.from(h, "hex"));
}

Deno.test("loadCsiProto() decodes Go-encoded ControllerPublishVolumeRequest (mount, every field)", () => {
  assert.deepEqual(
    decodeRequest("Controller", "ControllerPublishVolume", GO_ENCODED.publishMount),
    {
      volumeId: "vol-1",
      nodeId: "node-1",
      volumeCapability: {
        mount: { fsType: "ext4", mountFlags: ["ro", "noatime"], volumeMountGroup: "1000" },
        accessMode: { mode: "SINGLE_NODE_MULTI_WRITER" },
        accessType: "mount",
      },
      readonly: true,
      secrets: { password: "s3cr3t" },
      volumeContext: { pool: "fast" },
    },
  );
});

Deno.test("loadCsiProto() decodes Go-encoded block capability and SINGLE_NODE_SINGLE_WRITER", () => {
  const req = decodeRequest("Controller", "ControllerPublishVolume", GO_ENCODED.publishBlock) as {
    volumeCapability: unknown;
  };
  assert.deepEqual(req.volumeCapability, {
    block: {},
    accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" },
    accessType: "block",
  });
});

Deno.test("loadCsiProto() encodes requests byte-identical to Go where field order agrees", () => {
  const enc = (service: "Identity" | "Controller", method: string, value: object) =>
    hex(proto.method(service, method).definition.requestSerialize(value));
  assert.equal(
    enc("Controller", "ControllerUnpublishVolume", {
      volumeId: "vol-1",
      nodeId: "node-1",
      secrets: { k: "v" },
    }),
    GO_ENCODED.unpublish,
  );
  assert.equal(
    enc("Controller", "ListVolumes", { maxEntries: 5, startingToken: "t1" }),
    GO_ENCODED.listRequest,
  );
  // Go writes oneof members after the other fields; protobufjs in field-number order. Both are
  // valid encodings, so compare the decoded form of our encoding instead.
  const ours = proto.method("Controller", "ControllerPublishVolume").definition.requestSerialize({
    volumeId: "vol-2",
    nodeId: "node-2",
    volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" } },
  });
  assert.deepEqual(
    decodeRequest("Controller", "ControllerPublishVolume", hex(ours)),
    decodeRequest("Controller", "ControllerPublishVolume", GO_ENCODED.publishBlock),
  );
});

Deno.test("loadCsiProto() decodes Go-encoded responses", () => {
  assert.deepEqual(
    decodeResponse("Controller", "ControllerPublishVolume", GO_ENCODED.publishResponse),
    { publishContext: { devicePath: "/dev/x" } },
  );
  assert.deepEqual(decodeResponse("Controller", "ListVolumes", GO_ENCODED.listResponse), {
    entries: [{
      volume: {
        capacityBytes: "1073741824",
        volumeId: "vol-1",
        volumeContext: { a: "b" },
        contentSource: null,
        accessibleTopology: [],
      },
      status: {
        publishedNodeIds: ["node-1", "node-2"],
        volumeCondition: { abnormal: true, message: "degraded" },
      },
    }],
    nextToken: "next",
  });
  assert.deepEqual(decodeResponse("Identity", "Probe", GO_ENCODED.probeFalse), {
    ready: { value: false },
  });
  assert.deepEqual(decodeResponse("Identity", "Probe", ""), { ready: null });
  assert.deepEqual(decodeResponse("Identity", "GetPluginInfo", GO_ENCODED.pluginInfo), {
    name: "example.csi.k8s.io",
    vendorVersion: "1.0.0",
    manifest: { m: "n" },
  });
  assert.deepEqual(decodeResponse("Identity", "GetPluginCapabilities", GO_ENCODED.pluginCaps), {
    capabilities: [
      { service: { type: "CONTROLLER_SERVICE" }, type: "service" },
      { volumeExpansion: { type: "ONLINE" }, type: "volumeExpansion" },
    ],
  });
  assert.deepEqual(
    decodeResponse("Controller", "ControllerGetCapabilities", GO_ENCODED.controllerCaps),
    {
      capabilities: [
        { rpc: { type: "PUBLISH_UNPUBLISH_VOLUME" }, type: "rpc" },
        { rpc: { type: "LIST_VOLUMES_PUBLISHED_NODES" }, type: "rpc" },
        { rpc: { type: "GET_SNAPSHOT" }, type: "rpc" },
      ],
    },
  );
});

Deno.test("CSI_SECRET_FIELDS lists exactly the fields marked csi_secret in the descriptor", () => {
  const root = protobuf.Root.fromJSON(csiDescriptor());
  const marked: Record<string, string[]> = {};
  const walk = (ns: protobuf.NamespaceBase) => {
    for (const nested of ns.nestedArray) {
      if (nested instanceof protobuf.Type) {
        for (const field of nested.fieldsArray) {
          if (field.options?.["(csi_secret)"] === true) {
            (marked[nested.fullName.slice(1)] ??= []).push(field.name);
          }
        }
      }
      if (nested instanceof protobuf.Namespace) walk(nested);
    }
  };
  walk(root);
  assert.deepEqual(marked, CSI_SECRET_FIELDS);
  assert.equal(isSecretField("csi.v1.ControllerPublishVolumeRequest", "secrets"), true);
  assert.equal(isSecretField("csi.v1.ControllerPublishVolumeRequest", "volumeContext"), false);
});

Deno.test("loadCsiProto() names full gRPC methods and rejects unknown ones", () => {
  const m = proto.method("Controller", "ControllerPublishVolume");
  assert.equal(m.path, "/csi.v1.Controller/ControllerPublishVolume");
  assert.equal(m.requestType.fullName, ".csi.v1.ControllerPublishVolumeRequest");
  assert.equal(proto.method("Identity", "Probe").path, "/csi.v1.Identity/Probe");
  assert.throws(() => proto.method("Controller", "CreateVolume"), RangeError);
  assert.deepEqual(Object.keys(proto.services.Controller).sort(), [
    "ControllerGetCapabilities",
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ListVolumes",
  ]);
});
