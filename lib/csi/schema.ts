/**
 * The CSI messages and methods the attacher speaks, as a small schema table: field names
 * (camelCase), numbers and types as in `proto/csi.proto` (CSI spec v1.13.0), which
 * `schema_test.ts` checks against the descriptor generated from that file. The wire codec
 * ({@link import("../wire/grpc/protowire.ts")}) and log sanitizing ({@link import("./grpc_log.ts")}) are
 * driven by it.
 *
 * @module
 */

import type { FieldDescriptor, FieldKind, MessageDescriptor } from "../wire/grpc/descriptor.ts";

/** One field of a CSI message: the codec's descriptor plus the `csi_secret` option. */
export interface FieldSchema extends FieldDescriptor {
  /** Marked `[(csi_secret) = true]` in the spec. */
  readonly secret: boolean;
  /** For `message` fields: the message type. */
  readonly message?: MessageSchema;
}

/** One CSI message type. */
export interface MessageSchema extends MessageDescriptor {
  /** Fields in field-number order. */
  readonly fields: readonly FieldSchema[];
  /** Fields by camelCase name. */
  readonly byName: ReadonlyMap<string, FieldSchema>;
  /** Fields by number. */
  readonly byNumber: ReadonlyMap<number, FieldSchema>;
}

interface FieldSpec {
  name: string;
  number: number;
  kind: FieldKind;
  repeated?: boolean;
  oneof?: string;
  secret?: boolean;
  /** Message type name (key of {@link SPECS}) or enum values. */
  type?: string;
  enumValues?: readonly string[];
}

const ACCESS_MODES = [
  "UNKNOWN",
  "SINGLE_NODE_WRITER",
  "SINGLE_NODE_READER_ONLY",
  "MULTI_NODE_READER_ONLY",
  "MULTI_NODE_SINGLE_WRITER",
  "MULTI_NODE_MULTI_WRITER",
  "SINGLE_NODE_SINGLE_WRITER",
  "SINGLE_NODE_MULTI_WRITER",
];

/**
 * Value names by number from `NAME: number` pairs, as the proto writes an enum: a number the
 * spec reserved (a removed value) is a hole, so it decodes as the number.
 */
function enumByNumber(values: Readonly<Record<string, number>>): readonly string[] {
  const out: string[] = [];
  for (const [name, n] of Object.entries(values)) out[n] = name;
  return out;
}

const PLUGIN_SERVICE_TYPES = [
  "UNKNOWN",
  "CONTROLLER_SERVICE",
  "VOLUME_ACCESSIBILITY_CONSTRAINTS",
  "GROUP_CONTROLLER_SERVICE",
  "SNAPSHOT_METADATA_SERVICE",
  "SNAPSHOT_ACCESSIBILITY_CONSTRAINTS",
];

const VOLUME_EXPANSION_TYPES = ["UNKNOWN", "ONLINE", "OFFLINE"];

/** v1.13.0 reserved 11, the removed alpha VOLUME_CONDITION. */
const CONTROLLER_RPC_TYPES = enumByNumber({
  UNKNOWN: 0,
  CREATE_DELETE_VOLUME: 1,
  PUBLISH_UNPUBLISH_VOLUME: 2,
  LIST_VOLUMES: 3,
  GET_CAPACITY: 4,
  CREATE_DELETE_SNAPSHOT: 5,
  LIST_SNAPSHOTS: 6,
  CLONE_VOLUME: 7,
  PUBLISH_READONLY: 8,
  EXPAND_VOLUME: 9,
  LIST_VOLUMES_PUBLISHED_NODES: 10,
  GET_VOLUME: 12,
  SINGLE_NODE_MULTI_WRITER: 13,
  MODIFY_VOLUME: 14,
  GET_SNAPSHOT: 15,
  GET_VOLUME_HEALTH: 16,
  LIST_VOLUME_HEALTH: 17,
});

const str = (name: string, number: number, repeated = false): FieldSpec => ({
  name,
  number,
  kind: "string",
  repeated,
});
const map = (name: string, number: number, secret = false): FieldSpec => ({
  name,
  number,
  kind: "map",
  secret,
});
const msg = (name: string, number: number, type: string, more: Partial<FieldSpec> = {}) => ({
  name,
  number,
  kind: "message" as const,
  type,
  ...more,
});
const enm = (name: string, number: number, enumValues: readonly string[]): FieldSpec => ({
  name,
  number,
  kind: "enum",
  enumValues,
});

/** Every message, by fully qualified name; fields in number order. */
const SPECS: Readonly<Record<string, readonly FieldSpec[]>> = {
  "google.protobuf.BoolValue": [{ name: "value", number: 1, kind: "bool" }],
  "csi.v1.GetPluginInfoRequest": [],
  "csi.v1.GetPluginInfoResponse": [str("name", 1), str("vendorVersion", 2), map("manifest", 3)],
  "csi.v1.GetPluginCapabilitiesRequest": [],
  "csi.v1.GetPluginCapabilitiesResponse": [
    msg("capabilities", 1, "csi.v1.PluginCapability", { repeated: true }),
  ],
  "csi.v1.PluginCapability": [
    msg("service", 1, "csi.v1.PluginCapability.Service", { oneof: "type" }),
    msg("volumeExpansion", 2, "csi.v1.PluginCapability.VolumeExpansion", { oneof: "type" }),
  ],
  "csi.v1.PluginCapability.Service": [enm("type", 1, PLUGIN_SERVICE_TYPES)],
  "csi.v1.PluginCapability.VolumeExpansion": [enm("type", 1, VOLUME_EXPANSION_TYPES)],
  "csi.v1.ProbeRequest": [],
  "csi.v1.ProbeResponse": [msg("ready", 1, "google.protobuf.BoolValue")],
  "csi.v1.VolumeContentSource": [
    msg("snapshot", 1, "csi.v1.VolumeContentSource.SnapshotSource", { oneof: "type" }),
    msg("volume", 2, "csi.v1.VolumeContentSource.VolumeSource", { oneof: "type" }),
  ],
  "csi.v1.VolumeContentSource.SnapshotSource": [str("snapshotId", 1)],
  "csi.v1.VolumeContentSource.VolumeSource": [str("volumeId", 1)],
  "csi.v1.VolumeCapability": [
    msg("block", 1, "csi.v1.VolumeCapability.BlockVolume", { oneof: "accessType" }),
    msg("mount", 2, "csi.v1.VolumeCapability.MountVolume", { oneof: "accessType" }),
    msg("accessMode", 3, "csi.v1.VolumeCapability.AccessMode"),
  ],
  "csi.v1.VolumeCapability.BlockVolume": [],
  "csi.v1.VolumeCapability.MountVolume": [
    str("fsType", 1),
    str("mountFlags", 2, true),
    str("volumeMountGroup", 3),
  ],
  "csi.v1.VolumeCapability.AccessMode": [enm("mode", 1, ACCESS_MODES)],
  "csi.v1.Volume": [
    { name: "capacityBytes", number: 1, kind: "int64" },
    str("volumeId", 2),
    map("volumeContext", 3),
    msg("contentSource", 4, "csi.v1.VolumeContentSource"),
    msg("accessibleTopology", 5, "csi.v1.Topology", { repeated: true }),
  ],
  "csi.v1.Topology": [map("segments", 1)],
  "csi.v1.ControllerPublishVolumeRequest": [
    str("volumeId", 1),
    str("nodeId", 2),
    msg("volumeCapability", 3, "csi.v1.VolumeCapability"),
    { name: "readonly", number: 4, kind: "bool" },
    map("secrets", 5, true),
    map("volumeContext", 6),
  ],
  "csi.v1.ControllerPublishVolumeResponse": [map("publishContext", 1)],
  "csi.v1.ControllerUnpublishVolumeRequest": [
    str("volumeId", 1),
    str("nodeId", 2),
    map("secrets", 3, true),
  ],
  "csi.v1.ControllerUnpublishVolumeResponse": [],
  "csi.v1.ListVolumesRequest": [
    { name: "maxEntries", number: 1, kind: "int32" },
    str("startingToken", 2),
  ],
  "csi.v1.ListVolumesResponse": [
    msg("entries", 1, "csi.v1.ListVolumesResponse.Entry", { repeated: true }),
    str("nextToken", 2),
  ],
  // Field 2, the alpha VolumeCondition, was removed in v1.13.0 and is reserved.
  "csi.v1.ListVolumesResponse.VolumeStatus": [str("publishedNodeIds", 1, true)],
  "csi.v1.ListVolumesResponse.Entry": [
    msg("volume", 1, "csi.v1.Volume"),
    msg("status", 2, "csi.v1.ListVolumesResponse.VolumeStatus"),
  ],
  "csi.v1.ControllerGetCapabilitiesRequest": [],
  "csi.v1.ControllerGetCapabilitiesResponse": [
    msg("capabilities", 1, "csi.v1.ControllerServiceCapability", { repeated: true }),
  ],
  "csi.v1.ControllerServiceCapability": [
    msg("rpc", 1, "csi.v1.ControllerServiceCapability.RPC", { oneof: "type" }),
  ],
  "csi.v1.ControllerServiceCapability.RPC": [enm("type", 1, CONTROLLER_RPC_TYPES)],
};

function buildSchemas(): ReadonlyMap<string, MessageSchema> {
  const schemas = new Map<string, MessageSchema & { fields: FieldSchema[] }>();
  for (const name of Object.keys(SPECS)) {
    schemas.set(name, { name, fields: [], byName: new Map(), byNumber: new Map() });
  }
  for (const [name, specs] of Object.entries(SPECS)) {
    const schema = schemas.get(name)!;
    for (const spec of specs) {
      const message = spec.type === undefined ? undefined : schemas.get(spec.type);
      if (spec.kind === "message" && message === undefined) {
        throw new Error(`schema: ${name}.${spec.name} refers to unknown ${spec.type}`);
      }
      const field: FieldSchema = {
        name: spec.name,
        number: spec.number,
        kind: spec.kind,
        repeated: spec.repeated ?? false,
        secret: spec.secret ?? false,
        ...(spec.oneof === undefined ? {} : { oneof: spec.oneof }),
        ...(message === undefined ? {} : { message }),
        ...(spec.enumValues === undefined ? {} : { enumValues: spec.enumValues }),
      };
      schema.fields.push(field);
      (schema.byName as Map<string, FieldSchema>).set(field.name, field);
      (schema.byNumber as Map<number, FieldSchema>).set(field.number, field);
    }
  }
  return schemas;
}

const SCHEMAS = buildSchemas();

/** A message schema by fully qualified name. @throws {RangeError} for an unknown message. */
export function messageSchema(name: string): MessageSchema {
  const schema = SCHEMAS.get(name);
  if (schema === undefined) throw new RangeError(`unknown CSI message ${name}`);
  return schema;
}

/** The CSI services this project speaks. */
export type CsiServiceName = "Identity" | "Controller";

/** One unary RPC of a CSI service. */
export interface CsiMethod {
  /** Full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume` (the metrics label). */
  readonly path: string;
  readonly service: CsiServiceName;
  /** Method name as in the proto, e.g. `ControllerPublishVolume`. */
  readonly name: string;
  readonly requestType: MessageSchema;
  readonly responseType: MessageSchema;
}

/** The RPCs of `proto/csi.proto`, per service. */
const METHODS: Readonly<Record<CsiServiceName, readonly string[]>> = {
  Identity: ["GetPluginInfo", "GetPluginCapabilities", "Probe"],
  Controller: [
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ListVolumes",
    "ControllerGetCapabilities",
  ],
};

/** Looks up one RPC. @throws {RangeError} for a method `proto/csi.proto` does not have. */
export function csiMethod(service: CsiServiceName, name: string): CsiMethod {
  if (!METHODS[service]?.includes(name)) {
    throw new RangeError(`unknown CSI method ${service}.${name}`);
  }
  return {
    path: `/csi.v1.${service}/${name}`,
    service,
    name,
    requestType: messageSchema(`csi.v1.${name}Request`),
    responseType: messageSchema(`csi.v1.${name}Response`),
  };
}
