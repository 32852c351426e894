/**
 * The resources {@link import("./server.ts").MemoryApiServer} serves, with the few
 * per-resource rules of the real registry strategies that clients can observe.
 *
 * @module
 */

import type { Resource } from "../../lib/kube/api.ts";
import { type FieldSchema, VOLUME_ATTACHMENT_FIELDS } from "./field_schema.ts";
import type { FieldCause } from "./status_errors.ts";
import { validateVolumeAttachmentCreate, validateVolumeAttachmentUpdate } from "./validation.ts";

/** One served resource. */
export interface ServedResource extends Resource {
  /** `kind` of one object, e.g. `VolumeAttachment`. */
  kind: string;
  /** `kind` of a list, e.g. `VolumeAttachmentList`. */
  listKind: string;
  /** Has a `/status` subresource: the main resource then ignores changes to `status`. */
  statusSubresource: boolean;
  /** PUT of a missing object creates it (true only for Events). */
  allowCreateOnUpdate: boolean;
  /**
   * A PUT without `metadata.resourceVersion` is accepted (the strategy's
   * `AllowUnconditionalUpdate`); when false it answers 422.
   */
  allowUnconditionalUpdate: boolean;
  /**
   * The status a create over HTTP stores (the strategy's `PrepareForCreate` resets it);
   * undefined keeps what the client sent.
   */
  initialStatus?: (now: string) => Record<string, unknown>;
  /** `spec` fields of type `metav1.MicroTime`, which must have six fraction digits. */
  microTimeFields?: readonly string[];
  /**
   * Known fields, for field validation of bodies over HTTP (unknown ones are dropped with a
   * warning, or refused with `fieldValidation=Strict`); undefined: every field is kept.
   */
  fields?: FieldSchema;
  /** Field errors of an object created over HTTP (422 when any), besides its name. */
  validateCreate?: (obj: Record<string, unknown>) => FieldCause[];
  /** Field errors of an update over HTTP of the main resource (PUT or patch; 422 when any). */
  validateUpdate?: (next: Record<string, unknown>, old: Record<string, unknown>) => FieldCause[];
  /** Sets the defaults the real server's defaulting functions set on a decoded body, in place. */
  applyDefaults?: (obj: Record<string, unknown>) => void;
  /**
   * Fields without `omitempty` whose Go type can be nil (slices, maps, pointers): the real server
   * writes them as `null` when absent or null, where other null members are dropped. Dotted paths
   * from the object's root; `*` stands for each element of an array.
   */
  nullWhenAbsent?: readonly string[];
  /**
   * The members besides kind, apiVersion and metadata of an empty object of this kind as the real
   * server serializes it (fields without `omitempty`): the body of a watch BOOKMARK event.
   */
  emptyObject: Readonly<Record<string, unknown>>;
}

/**
 * `SetDefaults_PersistentVolume`: `spec.persistentVolumeReclaimPolicy` `Retain` and
 * `spec.volumeMode` `Filesystem` when absent.
 */
function defaultPersistentVolume(obj: Record<string, unknown>): void {
  const spec = obj.spec;
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) return;
  const s = spec as Record<string, unknown>;
  if (s.persistentVolumeReclaimPolicy === undefined || s.persistentVolumeReclaimPolicy === "") {
    s.persistentVolumeReclaimPolicy = "Retain";
  }
  if (s.volumeMode === undefined || s.volumeMode === null) s.volumeMode = "Filesystem";
}

/** The resources served, in URL order. */
export const SERVED_RESOURCES: readonly ServedResource[] = [
  {
    group: "storage.k8s.io",
    version: "v1",
    plural: "volumeattachments",
    singular: "volumeattachment",
    kind: "VolumeAttachment",
    emptyObject: { spec: { attacher: "", source: {}, nodeName: "" }, status: { attached: false } },
    listKind: "VolumeAttachmentList",
    namespaced: false,
    statusSubresource: true,
    allowUnconditionalUpdate: false,
    allowCreateOnUpdate: false,
    // VolumeAttachmentStatus.Attached has no omitempty: a new object reads `{attached: false}`.
    initialStatus: () => ({ attached: false }),
    fields: VOLUME_ATTACHMENT_FIELDS,
    validateCreate: validateVolumeAttachmentCreate,
    validateUpdate: validateVolumeAttachmentUpdate,
  },
  {
    group: "",
    version: "v1",
    plural: "persistentvolumes",
    singular: "persistentvolume",
    kind: "PersistentVolume",
    emptyObject: { spec: {}, status: {} },
    listKind: "PersistentVolumeList",
    namespaced: false,
    statusSubresource: true,
    allowUnconditionalUpdate: true,
    allowCreateOnUpdate: false,
    initialStatus: (now) => ({ phase: "Pending", lastPhaseTransitionTime: now }),
    applyDefaults: defaultPersistentVolume,
  },
  {
    group: "storage.k8s.io",
    version: "v1",
    plural: "csinodes",
    singular: "csinode",
    kind: "CSINode",
    // v1.37 added `status` (storage health) with a status subresource; `PrepareForCreate` resets
    // it, and as a struct without `omitempty` it is written `{}` (kubernetes
    // pkg/registry/storage/csinode/strategy.go).
    emptyObject: { spec: { drivers: null }, status: {} },
    listKind: "CSINodeList",
    namespaced: false,
    statusSubresource: true,
    allowUnconditionalUpdate: false,
    allowCreateOnUpdate: false,
    initialStatus: () => ({}),
    nullWhenAbsent: ["spec.drivers", "spec.drivers.*.topologyKeys"],
  },
  {
    group: "",
    version: "v1",
    plural: "nodes",
    singular: "node",
    kind: "Node",
    emptyObject: {
      spec: {},
      status: {
        daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
        nodeInfo: {
          machineID: "",
          systemUUID: "",
          bootID: "",
          kernelVersion: "",
          osImage: "",
          containerRuntimeVersion: "",
          kubeletVersion: "",
          kubeProxyVersion: "",
          operatingSystem: "",
          architecture: "",
        },
      },
    },
    listKind: "NodeList",
    namespaced: false,
    statusSubresource: true,
    allowUnconditionalUpdate: true,
    allowCreateOnUpdate: false,
  },
  {
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    kind: "Secret",
    emptyObject: {},
    listKind: "SecretList",
    namespaced: true,
    statusSubresource: false,
    allowUnconditionalUpdate: true,
    allowCreateOnUpdate: false,
  },
  {
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    singular: "lease",
    kind: "Lease",
    emptyObject: { spec: {} },
    listKind: "LeaseList",
    namespaced: true,
    statusSubresource: false,
    allowUnconditionalUpdate: false,
    allowCreateOnUpdate: false,
    microTimeFields: ["acquireTime", "renewTime"],
  },
  {
    group: "",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    emptyObject: {
      involvedObject: {},
      source: {},
      firstTimestamp: null,
      lastTimestamp: null,
      eventTime: null,
      reportingComponent: "",
      reportingInstance: "",
    },
    listKind: "EventList",
    namespaced: true,
    statusSubresource: false,
    allowUnconditionalUpdate: true,
    allowCreateOnUpdate: true,
  },
];

/** `group/version`, or `version` for the core group. */
export function apiVersionOf(res: Resource): string {
  return res.group === "" ? res.version : `${res.group}/${res.version}`;
}

/** True when some served resource is in `group`/`version` (the server knows that API path). */
export function servesGroupVersion(group: string, version: string): boolean {
  return SERVED_RESOURCES.some((r) => r.group === group && r.version === version);
}

/** The served resource at `group`/`version`/`plural`, if any. */
export function findServedResource(
  group: string,
  version: string,
  plural: string,
): ServedResource | undefined {
  return SERVED_RESOURCES.find((r) =>
    r.group === group && r.version === version && r.plural === plural
  );
}

/**
 * The served resource for a {@link Resource} constant or a plural name (`"nodes"`).
 *
 * @throws {RangeError} when the resource is not served.
 */
export function resolveServedResource(ref: Resource | string): ServedResource {
  const found = typeof ref === "string"
    ? SERVED_RESOURCES.find((r) => r.plural === ref)
    : findServedResource(ref.group, ref.version, ref.plural);
  if (found === undefined) {
    const name = typeof ref === "string" ? ref : `${ref.plural}.${ref.group}/${ref.version}`;
    throw new RangeError(`resource ${name} is not served`);
  }
  return found;
}
