import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { CSI_CLIENT_LOADER_OPTIONS, loadCsiProto } from "./proto_loader.ts";
import { csiMethod, type CsiServiceName } from "../../lib/csi/schema.ts";
import { decodeMessage, encodeMessage } from "../../lib/wire/grpc/protowire.ts";

/**
 * Responses as the attacher's client decodes them are logged as JSON (`GRPC response`); before
 * the client had its own codec, they were proto-loader's objects. The same bytes must give the
 * same text, key order included.
 */
const RESPONSES: [CsiServiceName, string, string][] = [
  ["Controller", "ControllerPublishVolume", "0a140a0a6465766963655061746812062f6465762f78"],
  ["Controller", "ControllerPublishVolume", ""],
  [
    "Controller",
    "ListVolumes",
    "0a370a150880808080041205766f6c2d311a060a0161120162121e0a066e6f64652d310a066e6f64652d32120c08" +
    "011208646567726164656412046e657874",
  ],
  // An entry with a content source and topology, and one with neither volume nor status.
  [
    "Controller",
    "ListVolumes",
    "0a1a0a181205766f6c2d3222050a030a0178" + "2a080a060a016b120176" + "0a00",
  ],
  ["Controller", "ListVolumes", ""],
  ["Controller", "ControllerUnpublishVolume", ""],
  ["Controller", "ControllerGetCapabilities", "0a040a0208020a040a02080a0a040a02080f0a040a020863"],
  ["Identity", "Probe", "0a00"],
  ["Identity", "Probe", "0a020801"],
  ["Identity", "Probe", ""],
  [
    "Identity",
    "GetPluginInfo",
    "0a126578616d706c652e6373692e6b38732e696f1205312e302e301a060a016d12016e",
  ],
  ["Identity", "GetPluginCapabilities", "0a040a0208010a04120208010a00"],
];

const bytes = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));

Deno.test("the attacher's codec decodes responses to the same JSON text as proto-loader did", () => {
  const proto = loadCsiProto(CSI_CLIENT_LOADER_OPTIONS);
  for (const [service, name, hex] of RESPONSES) {
    const loader = proto.method(service, name).definition.responseDeserialize(
      Buffer.from(hex, "hex"),
    );
    const ours = decodeMessage(csiMethod(service, name).responseType, bytes(hex));
    assert.equal(JSON.stringify(ours), JSON.stringify(loader), `${name} ${hex}`);
  }
});

Deno.test("requests encoded by the attacher's codec decode in protobufjs as sent", () => {
  const proto = loadCsiProto(CSI_CLIENT_LOADER_OPTIONS);
  const publish = {
    volumeId: "vol-1",
    nodeId: "node-1",
    volumeCapability: {
      mount: { fsType: "xfs", mountFlags: ["a", "b"], volumeMountGroup: "7" },
      accessMode: { mode: "MULTI_NODE_SINGLE_WRITER" },
    },
    readonly: true,
    secrets: { k: "v" },
    volumeContext: { a: "ü" },
  };
  const method = csiMethod("Controller", "ControllerPublishVolume");
  const decoded = proto.method("Controller", "ControllerPublishVolume").definition
    .requestDeserialize(Buffer.from(encodeMessage(method.requestType, publish))) as Record<
      string,
      unknown
    >;
  assert.deepEqual(decoded, {
    ...publish,
    volumeCapability: { ...publish.volumeCapability, accessType: "mount" },
  });
});
