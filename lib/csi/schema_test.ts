import assert from "node:assert/strict";
import descriptor from "../../proto/csi_descriptor.json" with { type: "json" };
import { csiMethod, messageSchema } from "./schema.ts";
import { csiMessages, describedMethods, isSecretField } from "../../testkit/csi/schemas.ts";
import { decodeMessage, encodeMessage, ProtoWireError } from "../wire/grpc/protowire.ts";

/**
 * Messages encoded by Go with github.com/container-storage-interface/spec v1.12.0
 * (lib/go/csi, `proto.MarshalOptions{Deterministic: true}`), as hex.
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

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const bytes = (h: string) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
const decode = (name: string, h: string) => decodeMessage(messageSchema(name), bytes(h));
const encode = (name: string, value: object) => hex(encodeMessage(messageSchema(name), value));

// deno-lint-ignore no-explicit-any
type Json = any;

/** The descriptor entry of a message (`csi.v1.X.Y` or `google.protobuf.X`). */
function describedMessage(fullName: string): Json {
  let node: Json = descriptor;
  for (const part of fullName.split(".")) node = node.nested?.[part];
  return node;
}

Deno.test("the schema matches proto/csi.proto's descriptor: every field's number, type, label, oneof and csi_secret", () => {
  const scalarKinds: Record<string, string> = {
    string: "string",
    bool: "bool",
    int32: "int32",
    int64: "int64",
  };
  for (const schema of csiMessages().values()) {
    const described = describedMessage(schema.name);
    assert.ok(described?.fields, `${schema.name} is in the descriptor`);
    assert.deepEqual(
      schema.fields.map((f) => f.name).sort(),
      Object.keys(described.fields).sort(),
      `${schema.name}: field names`,
    );
    for (const field of schema.fields) {
      const d = described.fields[field.name];
      const where = `${schema.name}.${field.name}`;
      assert.equal(field.number, d.id, `${where}: number`);
      assert.equal(field.repeated, d.rule === "repeated", `${where}: repeated`);
      assert.equal(field.secret, d.options?.["(csi_secret)"] === true, `${where}: csi_secret`);
      const oneof = Object.entries(described.oneofs ?? {}).find(([, o]) =>
        (o as { oneof: string[] }).oneof.includes(field.name)
      )?.[0];
      assert.equal(field.oneof, oneof, `${where}: oneof`);
      if (field.kind === "map") {
        assert.deepEqual([d.keyType, d.type], ["string", "string"], `${where}: map type`);
      } else if (field.kind in scalarKinds) {
        assert.equal(d.type, scalarKinds[field.kind], `${where}: type`);
      } else if (field.kind === "message") {
        assert.ok(field.message!.name.endsWith(`.${d.type.replace(/^\.?google\.protobuf\./, "")}`));
      } else {
        // enum: the values by number
        const scope = describedMessage(schema.name);
        const values = scope.nested[d.type].values as Record<string, number>;
        const byNumber: string[] = [];
        for (const [name, n] of Object.entries(values)) byNumber[n] = name;
        assert.deepEqual(field.enumValues, byNumber, `${where}: enum values`);
      }
    }
  }
});

Deno.test("the schema has every method of the descriptor's services with their message types", () => {
  for (const service of ["Identity", "Controller"] as const) {
    const methods = describedMessage(`csi.v1.${service}`).methods as Record<string, Json>;
    assert.deepEqual(describedMethods(service).sort(), Object.keys(methods).sort());
    for (const [name, m] of Object.entries(methods)) {
      const method = csiMethod(service, name);
      assert.equal(method.path, `/csi.v1.${service}/${name}`);
      assert.equal(method.requestType.name, `csi.v1.${m.requestType}`);
      assert.equal(method.responseType.name, `csi.v1.${m.responseType}`);
    }
  }
  assert.throws(() => csiMethod("Controller", "CreateVolume"), RangeError);
});

Deno.test("the csi_secret fields are the secrets of publish and unpublish", () => {
  const secretFields = Object.fromEntries(
    [...csiMessages().values()]
      .map((m) => [m.name, m.fields.filter((f) => f.secret).map((f) => f.name)] as const)
      .filter(([, fields]) => fields.length > 0),
  );
  assert.deepEqual(secretFields, {
    "csi.v1.ControllerPublishVolumeRequest": ["secrets"],
    "csi.v1.ControllerUnpublishVolumeRequest": ["secrets"],
  });
  assert.equal(isSecretField("csi.v1.ControllerPublishVolumeRequest", "secrets"), true);
  assert.equal(isSecretField("csi.v1.ControllerPublishVolumeRequest", "volumeContext"), false);
});

Deno.test("decodeMessage() reads Go-encoded ControllerPublishVolumeRequest (mount, every field)", () => {
  assert.deepEqual(decode("csi.v1.ControllerPublishVolumeRequest", GO_ENCODED.publishMount), {
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
  });
  const block = decode("csi.v1.ControllerPublishVolumeRequest", GO_ENCODED.publishBlock);
  assert.deepEqual(block.volumeCapability, {
    block: {},
    accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" },
    accessType: "block",
  });
});

Deno.test("encodeMessage() writes requests byte-identical to Go", () => {
  assert.equal(
    encode("csi.v1.ControllerUnpublishVolumeRequest", {
      volumeId: "vol-1",
      nodeId: "node-1",
      secrets: { k: "v" },
    }),
    GO_ENCODED.unpublish,
  );
  assert.equal(
    encode("csi.v1.ListVolumesRequest", { maxEntries: 5, startingToken: "t1" }),
    GO_ENCODED.listRequest,
  );
  // Go writes oneof members after the other fields; we write in field-number order. Both are
  // valid; the decoded forms agree.
  const ours = encode("csi.v1.ControllerPublishVolumeRequest", {
    volumeId: "vol-2",
    nodeId: "node-2",
    volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" } },
    readonly: false,
    secrets: {},
    volumeContext: {},
  });
  assert.deepEqual(
    decode("csi.v1.ControllerPublishVolumeRequest", ours),
    decode("csi.v1.ControllerPublishVolumeRequest", GO_ENCODED.publishBlock),
  );
  // Proto3 defaults are left out, as Go leaves them out.
  assert.equal(
    encode("csi.v1.ListVolumesRequest", { maxEntries: 0, startingToken: "" }),
    "",
  );
});

Deno.test("decodeMessage() reads Go-encoded responses with defaults, int64 strings and oneof names", () => {
  assert.deepEqual(decode("csi.v1.ControllerPublishVolumeResponse", GO_ENCODED.publishResponse), {
    publishContext: { devicePath: "/dev/x" },
  });
  assert.deepEqual(decode("csi.v1.ListVolumesResponse", GO_ENCODED.listResponse), {
    entries: [{
      volume: {
        capacityBytes: "1073741824",
        volumeId: "vol-1",
        volumeContext: { a: "b" },
        contentSource: null,
        accessibleTopology: [],
      },
      // The Go encoding (spec v1.12.0) carries a VolumeCondition as field 2 of the status,
      // which v1.13.0 removed and reserved: it is skipped as an unknown field.
      status: { publishedNodeIds: ["node-1", "node-2"] },
    }],
    nextToken: "next",
  });
  assert.deepEqual(decode("csi.v1.ProbeResponse", GO_ENCODED.probeFalse), {
    ready: { value: false },
  });
  assert.deepEqual(decode("csi.v1.ProbeResponse", ""), { ready: null });
  assert.deepEqual(decode("csi.v1.GetPluginInfoResponse", GO_ENCODED.pluginInfo), {
    name: "example.csi.k8s.io",
    vendorVersion: "1.0.0",
    manifest: { m: "n" },
  });
  assert.deepEqual(decode("csi.v1.GetPluginCapabilitiesResponse", GO_ENCODED.pluginCaps), {
    capabilities: [
      { service: { type: "CONTROLLER_SERVICE" }, type: "service" },
      { volumeExpansion: { type: "ONLINE" }, type: "volumeExpansion" },
    ],
  });
  assert.deepEqual(
    decode("csi.v1.ControllerGetCapabilitiesResponse", GO_ENCODED.controllerCaps),
    {
      capabilities: [
        { rpc: { type: "PUBLISH_UNPUBLISH_VOLUME" }, type: "rpc" },
        { rpc: { type: "LIST_VOLUMES_PUBLISHED_NODES" }, type: "rpc" },
        { rpc: { type: "GET_SNAPSHOT" }, type: "rpc" },
      ],
    },
  );
});

Deno.test("decodeMessage() gives keys in proto-loader's order: repeated, maps, other fields, then oneofs", () => {
  const volume = decode("csi.v1.Volume", "0880808080041205766f6c2d311a060a0161120162");
  assert.deepEqual(Object.keys(volume), [
    "accessibleTopology",
    "volumeContext",
    "capacityBytes",
    "volumeId",
    "contentSource",
  ]);
  const cap = decode("csi.v1.VolumeCapability", "1a0208071200");
  assert.deepEqual(Object.keys(cap), ["accessMode", "mount", "accessType"]);
});

Deno.test("decodeMessage() skips unknown fields of every wire type and keeps unknown enum numbers", () => {
  // GetPluginInfoResponse with field 9 varint, 10 fixed64, 11 bytes, 12 fixed32, 13 group
  // around the known fields.
  const withUnknown = "4801" + "510102030405060708" + "5a03616263" + "6504030201" +
    "6b0801" + "6c" + GO_ENCODED.pluginInfo;
  assert.deepEqual(decode("csi.v1.GetPluginInfoResponse", withUnknown), {
    name: "example.csi.k8s.io",
    vendorVersion: "1.0.0",
    manifest: { m: "n" },
  });
  assert.deepEqual(decode("csi.v1.PluginCapability.Service", "0863"), { type: 99 });
});

Deno.test("int64 and int32 round-trip through their 10-byte negative and large forms", () => {
  for (const capacityBytes of ["0", "1", "-1", "9007199254740993", "-9223372036854775808"]) {
    const value = { capacityBytes, volumeId: "v" };
    const back = decode("csi.v1.Volume", encode("csi.v1.Volume", value));
    assert.equal(back.capacityBytes, capacityBytes);
  }
  assert.equal(encode("csi.v1.ListVolumesRequest", { maxEntries: -1 }), "08ffffffffffffffffff01");
  assert.deepEqual(decode("csi.v1.ListVolumesRequest", "08ffffffffffffffffff01"), {
    maxEntries: -1,
    startingToken: "",
  });
});

Deno.test("decodeMessage() keeps a __proto__ map key as data and takes the last of two oneof members", () => {
  // publish_context entry with key "__proto__"
  const key = Array.from(new TextEncoder().encode("__proto__"), (b) => b.toString(16)).join("");
  const entry = "0a09" + key + "1201" + "78";
  const res = decode("csi.v1.ControllerPublishVolumeResponse", "0a" + "0e" + entry);
  const context = res.publishContext as Record<string, string>;
  assert.equal(Object.getPrototypeOf(context), Object.prototype);
  assert.deepEqual(Object.entries(context), [["__proto__", "x"]]);
  // block then mount: mount wins
  assert.deepEqual(decode("csi.v1.VolumeCapability", "0a00" + "1200"), {
    accessMode: null,
    mount: { mountFlags: [], fsType: "", volumeMountGroup: "" },
    accessType: "mount",
  });
});

Deno.test("malformed bytes and wrongly typed values fail with a clear ProtoWireError", () => {
  assert.throws(() => decode("csi.v1.GetPluginInfoResponse", "0a05616263"), {
    name: "ProtoWireError",
    message: "truncated length-delimited field",
  });
  assert.throws(() => decode("csi.v1.GetPluginInfoResponse", "0801"), ProtoWireError);
  assert.throws(
    () => decode("csi.v1.GetPluginInfoResponse", "ffffffffffffffffffffff"),
    ProtoWireError,
  );
  assert.throws(
    () => encode("csi.v1.ControllerPublishVolumeRequest", { volumeId: 7 }),
    { message: "csi.v1.ControllerPublishVolumeRequest.volumeId: expected a string, got number 7" },
  );
  assert.throws(
    () =>
      encode("csi.v1.ControllerPublishVolumeRequest", {
        volumeCapability: { accessMode: { mode: "EVERYWHERE" } },
      }),
    /volumeCapability\.accessMode\.mode: unknown enum value "EVERYWHERE"/,
  );
  assert.throws(
    () => encode("csi.v1.ControllerUnpublishVolumeRequest", { secrets: { a: 1 } }),
    {
      message:
        "csi.v1.ControllerUnpublishVolumeRequest.secrets: expected string values, got a number",
    },
  );
});
