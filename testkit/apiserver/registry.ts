/**
 * The object storage behind {@link import("./server.ts").MemoryApiServer}: what the
 * real API server's generic registry and etcd do, for the parts clients can observe.
 *
 * - One global resourceVersion counter (a decimal string on objects); every write bumps it.
 * - A write that changes nothing is not a write: no new resourceVersion, no event.
 * - Objects are stored as the Go API server would serialize them: `null` members are dropped and
 *   empty `metadata.finalizers`, `annotations` and `labels` disappear (`omitempty`).
 * - Deletion with finalizers sets `deletionTimestamp`; the write that removes the last finalizer
 *   deletes the object. As in the real registry (`errEmptiedFinalizers`), that write is not
 *   stored: the DELETED event carries the last stored state (finalizers included) with a new
 *   resourceVersion, while the answer to the write is the written object (no finalizers) with
 *   the resourceVersion it was stored with.
 *
 * @module
 */

import type { Clock } from "../../lib/clock.ts";
import type { KubeObject, ObjectMeta } from "../../lib/kube/types.ts";
import { applyJsonPatch, JsonPatchError, parseJsonPatch } from "./json_patch.ts";
import { jsonEqual } from "../../lib/kube/patches.ts";
import { applyMergePatch } from "./merge_patch.ts";
import { microTimeParseError } from "./micro_time.ts";
import { apiVersionOf, type ServedResource } from "./resources.ts";
import { validateObjectName } from "./validation.ts";
import {
  alreadyExists,
  badRequest,
  conflict,
  type FieldCause,
  invalid,
  notFound,
  patchNotApplied,
  resourceExpired,
  resourceVersionRequired,
} from "./status_errors.ts";

/** A stored object: a {@link KubeObject} with any other top-level members. */
export type StoredObject = KubeObject & Record<string, unknown>;

/** Type of a change. */
export type ChangeType = "ADDED" | "MODIFIED" | "DELETED";

/** One change, as kept in the history and given to subscribers. */
export interface RegistryEvent {
  type: ChangeType;
  resource: ServedResource;
  /** The object after the change (for DELETED: the last state, with the deletion's version). */
  object: StoredObject;
  resourceVersion: number;
}

/** Options of a {@link Registry}. */
export interface RegistryOptions {
  /**
   * Most events kept for watches that resume from a resourceVersion (`Infinity`: all of them
   * until {@link Registry.compact} or {@link Registry.compactTo}, as etcd keeps its history).
   */
  historyLimit: number;
  /** The resourceVersion before the first write. */
  initialResourceVersion: number;
}

/** Which part of an object a write may change. */
export type Subresource = "" | "status";

/** A patch as received. */
export interface RegistryPatch {
  type: "merge" | "json";
  body: unknown;
}

/** True for a JSON object (not an array, not null). */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A deep copy. */
function clone<T>(value: T): T {
  return structuredClone(value);
}

/** Drops `null` members of objects, recursively (Go's `omitempty` on pointers, maps, slices). */
function pruneNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(pruneNulls);
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v !== null && v !== undefined) out[k] = pruneNulls(v);
  }
  return out;
}

/**
 * Sets each member at `path` (dotted, `*` for every array element; see
 * `ServedResource.nullWhenAbsent`) to `null` where the enclosing object lacks it.
 */
function fillNulls(value: unknown, path: readonly string[]): void {
  const [head, ...rest] = path;
  if (head === undefined) return;
  if (head === "*") {
    if (Array.isArray(value)) { for (const item of value) fillNulls(item, rest); }
    return;
  }
  if (!isObject(value)) return;
  if (rest.length === 0) {
    if (value[head] === undefined) value[head] = null;
    return;
  }
  fillNulls(value[head], rest);
}

/** RFC 3339 with whole seconds, as `metav1.Time` marshals. */
function timestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
}

/** The finalizers of an object, never null. */
function finalizersOf(obj: KubeObject): string[] {
  return obj.metadata.finalizers ?? [];
}

/** One `metadata.managedFields` entry (no field set is tracked: `fieldsV1` stays empty). */
interface ManagedFieldsEntry {
  manager: string;
  operation: "Update";
  apiVersion: string;
  time: string;
  fieldsType: "FieldsV1";
  fieldsV1: Record<string, never>;
  subresource?: string;
}

/** A copy of `obj`'s top level and metadata without `managedFields`, for comparisons. */
function withoutManagedFields(obj: StoredObject): StoredObject {
  const { managedFields: _m, ...metadata } = obj.metadata;
  return { ...obj, metadata: metadata as ObjectMeta };
}

/** True when `entry` is the Update entry of `manager` for `subresource`. */
function sameManager(
  entry: Record<string, unknown>,
  manager: string,
  subresource: Subresource,
): boolean {
  return entry.manager === manager && entry.operation === "Update" &&
    (entry.subresource ?? "") === subresource;
}

/** Puts `entry` in place of the same manager's entry, or appends it. */
function setManagedFields(obj: KubeObject, entry: ManagedFieldsEntry): void {
  const sub = (entry.subresource ?? "") as Subresource;
  const list: unknown[] = [...(obj.metadata.managedFields ?? [])];
  const i = list.findIndex((e) => isObject(e) && sameManager(e, entry.manager, sub));
  if (i >= 0) list[i] = entry;
  else list.push(entry);
  obj.metadata.managedFields = list;
}

/** Metadata fields no update or patch can change. */
const SYSTEM_FIELDS = [
  "name",
  "namespace",
  "uid",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
] as const;

/** Copies the {@link SYSTEM_FIELDS} of `from` onto `to` (removing those `from` lacks). */
function keepSystemFields(from: ObjectMeta, to: ObjectMeta): void {
  const src: Record<string, unknown> = from;
  const dst: Record<string, unknown> = to;
  for (const field of SYSTEM_FIELDS) {
    if (src[field] === undefined) delete dst[field];
    else dst[field] = src[field];
  }
}

/** A copy of an event with its own copy of the object (the resource is shared, it is constant). */
function copyEvent(ev: RegistryEvent): RegistryEvent {
  return { ...ev, object: clone(ev.object) };
}

/** Random suffix of `generateName`, from the alphabet the API server uses. */
function randomSuffix(): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  const bytes = crypto.getRandomValues(new Uint8Array(5));
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("");
}

/** `%#v` of a Go `[]string`. */
function goStringSlice(values: string[]): string {
  return `[]string{${values.map((v) => JSON.stringify(v)).join(", ")}}`;
}

/**
 * 400 when the object would not decode into its Go type; only `metav1.MicroTime` fields are
 * checked: `Lease in version "v1" cannot be handled as a Lease: parsing time ...`.
 */
function checkDecodable(res: ServedResource, obj: StoredObject): void {
  const spec = obj.spec;
  if (res.microTimeFields === undefined || !isObject(spec)) return;
  for (const field of res.microTimeFields) {
    const value = spec[field];
    if (typeof value !== "string") continue;
    const err = microTimeParseError(value);
    if (err !== undefined) {
      throw badRequest(
        `${res.kind} in version "${res.version}" cannot be handled as a ${res.kind}: ${err}`,
      );
    }
  }
}

/** The name `encoding/json` gives the JSON type of a value in an UnmarshalTypeError. */
function goJsonTypeName(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (typeof value === "boolean") return "bool";
  return typeof value;
}

/**
 * 400 `error decoding patch: json: cannot unmarshal object into Go value of type
 * []handlers.jsonPatchOp` for a JSON patch that is not an array of objects (null is an empty
 * patch, as Go decodes it).
 */
function checkJsonPatchShape(body: unknown): void {
  if (body === null) return;
  const prefix = "error decoding patch: json: cannot unmarshal";
  if (!Array.isArray(body)) {
    throw badRequest(
      `${prefix} ${goJsonTypeName(body)} into Go value of type []handlers.jsonPatchOp`,
    );
  }
  for (const op of body) {
    if (op !== null && !isObject(op)) {
      throw badRequest(
        `${prefix} ${goJsonTypeName(op)} into Go value of type handlers.jsonPatchOp`,
      );
    }
  }
}

/**
 * The objects and their history. Every method works on copies: callers never hold a reference
 * into the store. Methods throw {@link import("./status_errors.ts").StatusError} with the real
 * server's codes and messages.
 */
export class Registry {
  readonly #clock: Clock;
  readonly #historyLimit: number;
  readonly #objects = new Map<string, StoredObject>();
  readonly #listeners = new Set<(ev: RegistryEvent) => void>();
  #history: RegistryEvent[] = [];
  #rv: number;
  /** Events up to and including this version are no longer in the history. */
  #compactedRv: number;

  constructor(deps: { clock: Clock }, options: RegistryOptions) {
    const limit = options.historyLimit;
    if (!(limit === Infinity || (Number.isInteger(limit) && limit >= 1))) {
      throw new RangeError(`historyLimit must be a positive integer or Infinity, got ${limit}`);
    }
    this.#clock = deps.clock;
    this.#historyLimit = limit;
    this.#rv = options.initialResourceVersion;
    // Nothing is compacted yet: a watch from any older resourceVersion gets every event.
    this.#compactedRv = 0;
  }

  /** The current global resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Calls `fn` synchronously after every change; returns the unsubscribe function. */
  subscribe(fn: (ev: RegistryEvent) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** A copy of the object, or undefined. */
  find(res: ServedResource, namespace: string, name: string): StoredObject | undefined {
    const obj = this.#objects.get(this.#key(res, namespace, name));
    return obj === undefined ? undefined : clone(obj);
  }

  /** A copy of the object; 404 when missing. */
  get(res: ServedResource, namespace: string, name: string): StoredObject {
    const obj = this.find(res, namespace, name);
    if (obj === undefined) throw notFound(res, name);
    return obj;
  }

  /** Copies of the objects of `res` (in `namespace`, or all when undefined), sorted by key. */
  list(
    res: ServedResource,
    namespace?: string,
  ): { items: StoredObject[]; resourceVersion: number } {
    const items: StoredObject[] = [];
    const keys = [...this.#objects.keys()].sort();
    for (const key of keys) {
      const obj = this.#objects.get(key);
      if (obj === undefined || !this.#matches(res, namespace, key)) continue;
      items.push(clone(obj));
    }
    return { items, resourceVersion: this.#rv };
  }

  /**
   * The stored objects of `res` (in `namespace`, or all) in key order, as `list` but not copied,
   * for a watch that serializes them as it streams: a stored object is never changed in place
   * (every write stores a new one), so these stay the state at the returned resourceVersion.
   * Callers must not change them.
   */
  snapshot(
    res: ServedResource,
    namespace?: string,
  ): { items: readonly StoredObject[]; resourceVersion: number } {
    const keys = [...this.#objects.keys()].filter((key) => this.#matches(res, namespace, key));
    keys.sort();
    const items = keys.map((key) => this.#objects.get(key)!);
    return { items, resourceVersion: this.#rv };
  }

  /**
   * Creates an object. `seed: true` stores the object as given (status, deletionTimestamp, uid
   * and creationTimestamp kept when present) so tests can set up any state; `seed: false` is a
   * create over HTTP, where the server sets those fields itself and validates the object
   * (422 with the resource's field errors, see {@link ServedResource.validateCreate}).
   */
  create(
    res: ServedResource,
    namespace: string,
    body: unknown,
    opts: { seed: boolean; manager?: string },
  ): StoredObject {
    const obj = this.#asObject(body);
    const meta = obj.metadata;
    const ns = this.#namespaceFor(res, namespace, meta.namespace);
    let name = typeof meta.name === "string" ? meta.name : "";
    if (name === "" && typeof meta.generateName === "string" && meta.generateName !== "") {
      name = meta.generateName + randomSuffix();
    }
    const causes: FieldCause[] = [];
    if (name === "") {
      causes.push({
        reason: "FieldValueRequired",
        field: "metadata.name",
        message: "Required value: name or generateName is required",
      });
    }
    if (!opts.seed) {
      causes.push(...validateObjectName(name));
      if (res.validateCreate !== undefined) causes.push(...res.validateCreate(obj));
    }
    if (causes.length > 0) throw invalid(res, name, causes);
    if (!opts.seed) checkDecodable(res, obj);
    const key = this.#key(res, ns, name);
    if (this.#objects.has(key)) throw alreadyExists(res, name);

    const { kind: _k, apiVersion: _a, ...rest } = obj;
    const stored: StoredObject = { kind: res.kind, apiVersion: apiVersionOf(res), ...rest };
    stored.metadata = { ...meta, name };
    if (res.namespaced) stored.metadata.namespace = ns;
    else delete stored.metadata.namespace;
    if (!opts.seed || stored.metadata.uid === undefined) {
      stored.metadata.uid = crypto.randomUUID();
    }
    if (!opts.seed || stored.metadata.creationTimestamp === undefined) {
      stored.metadata.creationTimestamp = timestamp(this.#clock.wallNow());
    }
    if (!opts.seed) {
      delete stored.metadata.deletionTimestamp;
      delete stored.metadata.deletionGracePeriodSeconds;
      if (res.initialStatus !== undefined) {
        stored.status = res.initialStatus(timestamp(this.#clock.wallNow()));
      }
    }
    const normalized = this.#normalize(stored, res);
    if (opts.manager !== undefined) {
      setManagedFields(normalized, this.#managedEntry(res, opts.manager, ""));
    }
    normalized.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(key, normalized);
    this.#emit("ADDED", res, normalized);
    return clone(normalized);
  }

  /**
   * Replaces an object (PUT). A non-empty `metadata.resourceVersion` that differs from the stored
   * one gives 409 Conflict; none gives 422 on resources without unconditional updates
   * (volumeattachments, csinodes, leases). On the main resource `status` changes are ignored when the resource
   * has a status subresource; on `status` only `status` changes. `validate` (an update over
   * HTTP) checks the object as the real server does (422 with the resource's field errors).
   */
  update(
    res: ServedResource,
    namespace: string,
    name: string,
    body: unknown,
    opts: { subresource: Subresource; manager?: string; validate?: boolean },
  ): StoredObject {
    const obj = this.#asObject(body);
    if (obj.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${
          String(obj.metadata.name ?? "")
        }) does not match the name on the URL (${name})`,
      );
    }
    const ns = this.#namespaceFor(res, namespace, obj.metadata.namespace);
    checkDecodable(res, obj);
    const current = this.#objects.get(this.#key(res, ns, name));
    if (current === undefined) {
      if (res.allowCreateOnUpdate && opts.subresource === "") {
        return this.create(res, ns, obj, { seed: false, manager: opts.manager });
      }
      throw notFound(res, name);
    }
    const rv = obj.metadata.resourceVersion;
    if ((rv === undefined || rv === "" || rv === "0") && !res.allowUnconditionalUpdate) {
      throw resourceVersionRequired(res, name);
    }
    const validate = opts.validate === true && opts.subresource === "";
    return this.#write(res, current, obj, opts.subresource, opts.manager, validate);
  }

  /**
   * Patches an object: merge patch (RFC 7386) or JSON patch (RFC 6902), applied to the stored
   * object, then written as {@link update} writes (a `metadata.resourceVersion` in the result that
   * differs from the stored one gives 409). A JSON patch that does not apply gives 422.
   * Name, namespace, uid, creationTimestamp and deletion fields cannot be changed. `validate` (a
   * patch over HTTP) checks the result as an update does.
   */
  patch(
    res: ServedResource,
    namespace: string,
    name: string,
    patch: RegistryPatch,
    opts: { subresource: Subresource; manager?: string; validate?: boolean },
  ): StoredObject {
    const ns = res.namespaced ? namespace : "";
    const current = this.#objects.get(this.#key(res, ns, name));
    if (current === undefined) throw notFound(res, name);
    let patched: unknown;
    if (patch.type === "merge") {
      if (!isObject(patch.body)) throw badRequest("Invalid JSON Patch");
      patched = applyMergePatch(current, patch.body);
    } else {
      checkJsonPatchShape(patch.body);
      try {
        patched = applyJsonPatch(current, parseJsonPatch(patch.body ?? []));
      } catch (err) {
        if (err instanceof JsonPatchError) {
          if (err.kind === "invalid") throw badRequest(err.message);
          throw patchNotApplied();
        }
        throw err;
      }
    }
    const obj = this.#asObject(patched);
    checkDecodable(res, obj);
    // A patch that sets another uid is refused (metadata validation: the uid is immutable);
    // controllers rely on this to make a patch apply only to the object they saw.
    const uid = obj.metadata.uid;
    if (uid !== undefined && uid !== current.metadata.uid) {
      throw invalid(res, name, [{
        reason: "FieldValueInvalid",
        field: "metadata.uid",
        message: `Invalid value: ${JSON.stringify(uid)}: field is immutable`,
      }]);
    }
    keepSystemFields(current.metadata, obj.metadata);
    const validate = opts.validate === true && opts.subresource === "";
    return this.#write(res, current, obj, opts.subresource, opts.manager, validate);
  }

  /**
   * Deletes an object: with finalizers it only gets `deletionTimestamp` (once; a second delete
   * changes nothing), without it is removed. Returns the object's state after the call.
   */
  delete(res: ServedResource, namespace: string, name: string): StoredObject {
    const ns = res.namespaced ? namespace : "";
    const key = this.#key(res, ns, name);
    const current = this.#objects.get(key);
    if (current === undefined) throw notFound(res, name);
    if (finalizersOf(current).length === 0) return this.#remove(res, key, current);
    if (current.metadata.deletionTimestamp !== undefined) return clone(current);
    const next = clone(current);
    next.metadata.deletionTimestamp = timestamp(this.#clock.wallNow());
    next.metadata.deletionGracePeriodSeconds = 0;
    next.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(key, next);
    this.#emit("MODIFIED", res, next);
    return clone(next);
  }

  /**
   * The events after resourceVersion `rv` that `wanted` accepts (all by default), oldest first.
   * Only those are copied: a watch of a quiet resource resuming from an old resourceVersion
   * costs the events of its resource, not the whole history (kube-apiserver's watch cache keeps
   * one per resource).
   *
   * @throws {StatusError} 410 Expired when events after `rv` were already dropped.
   */
  eventsAfter(rv: number, wanted: (ev: RegistryEvent) => boolean = () => true): RegistryEvent[] {
    if (rv < this.#compactedRv) throw resourceExpired(rv, this.#compactedRv);
    const history = this.#history;
    // The history is in resourceVersion order: the first event after `rv` by bisection.
    let lo = 0;
    let hi = history.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (history[mid]!.resourceVersion > rv) hi = mid;
      else lo = mid + 1;
    }
    const out: RegistryEvent[] = [];
    for (let i = lo; i < history.length; i++) {
      const ev = history[i]!;
      if (wanted(ev)) out.push(copyEvent(ev));
    }
    return out;
  }

  /** The resourceVersion of the last compaction: older states and events are gone. */
  get compactedResourceVersion(): number {
    return this.#compactedRv;
  }

  /** Drops the whole history: a watch must then start from the current resourceVersion. */
  compact(): void {
    this.compactTo(this.#rv);
  }

  /**
   * Drops the events up to and including resourceVersion `rv`, as an etcd compaction does: a
   * watch from an older resourceVersion then gets 410 Expired.
   */
  compactTo(rv: number): void {
    if (rv <= this.#compactedRv) return;
    this.#history = this.#history.filter((ev) => ev.resourceVersion > rv);
    this.#compactedRv = rv;
  }

  /** Stores `incoming` over `current` after the checks every update makes. */
  #write(
    res: ServedResource,
    current: StoredObject,
    incoming: StoredObject,
    subresource: Subresource,
    manager: string | undefined,
    validate: boolean,
  ): StoredObject {
    const name = current.metadata.name;
    const wanted = incoming.metadata.resourceVersion;
    if (wanted !== undefined && wanted !== "" && wanted !== current.metadata.resourceVersion) {
      throw conflict(res, name);
    }
    const next = this.#normalize(this.#compose(res, current, incoming, subresource), res);
    if (validate && res.validateUpdate !== undefined) {
      const causes = res.validateUpdate(next, current);
      if (causes.length > 0) throw invalid(res, name, causes);
    }
    if (current.metadata.deletionTimestamp !== undefined) {
      const old = new Set(finalizersOf(current));
      const added = finalizersOf(next).filter((f) => !old.has(f));
      if (added.length > 0) {
        throw invalid(res, name, [{
          reason: "FieldValueForbidden",
          field: "metadata.finalizers",
          message: "Forbidden: no new finalizers can be added if the object is being deleted, " +
            `found new finalizers ${goStringSlice(added)}`,
        }]);
      }
    }
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    // A write without managedFields keeps the stored ones, as the field manager does.
    if (next.metadata.managedFields === undefined && current.metadata.managedFields !== undefined) {
      next.metadata.managedFields = clone(current.metadata.managedFields);
    }
    // A write that changes nothing but managedFields is a no-op (an entry would own no field).
    if (jsonEqual(withoutManagedFields(next), withoutManagedFields(current))) return clone(current);
    if (manager !== undefined) {
      setManagedFields(next, this.#managedEntry(res, manager, subresource));
    }
    const key = this.#key(res, current.metadata.namespace ?? "", name);
    if (next.metadata.deletionTimestamp !== undefined && finalizersOf(next).length === 0) {
      this.#remove(res, key, current);
      // As `deleteWithoutFinalizers` does, the answer is the object of the request (no
      // finalizers, the stored resourceVersion), not the deleted state the watch sees.
      return next;
    }
    next.metadata.resourceVersion = String(++this.#rv);
    this.#objects.set(key, next);
    this.#emit("MODIFIED", res, next);
    return clone(next);
  }

  /** The managedFields entry of a write over HTTP, at the current time. */
  #managedEntry(
    res: ServedResource,
    manager: string,
    subresource: Subresource,
  ): ManagedFieldsEntry {
    const entry: ManagedFieldsEntry = {
      manager,
      operation: "Update",
      apiVersion: apiVersionOf(res),
      time: timestamp(this.#clock.wallNow()),
      fieldsType: "FieldsV1",
      fieldsV1: {},
    };
    if (subresource !== "") entry.subresource = subresource;
    return entry;
  }

  /** The object a write stores, before normalization. */
  #compose(
    res: ServedResource,
    current: StoredObject,
    incoming: StoredObject,
    subresource: Subresource,
  ): StoredObject {
    if (subresource === "status") {
      const next = clone(current);
      if (incoming.status !== undefined) next.status = clone(incoming.status);
      else if (res.initialStatus !== undefined) {
        next.status = res.initialStatus(timestamp(this.#clock.wallNow()));
      } else delete next.status;
      return next;
    }
    const { kind: _k, apiVersion: _a, ...rest } = clone(incoming);
    const next: StoredObject = { kind: res.kind, apiVersion: apiVersionOf(res), ...rest };
    if (res.statusSubresource) {
      if (current.status === undefined) delete next.status;
      else next.status = clone(current.status);
    }
    keepSystemFields(current.metadata, next.metadata);
    return next;
  }

  /** Removes an object: the DELETED event carries its last state with a new version. */
  #remove(res: ServedResource, key: string, current: StoredObject): StoredObject {
    const last = clone(current);
    last.metadata.resourceVersion = String(++this.#rv);
    this.#objects.delete(key);
    this.#emit("DELETED", res, last);
    return clone(last);
  }

  /** The stored form of an object (see the module notes). */
  #normalize(obj: StoredObject, res: ServedResource): StoredObject {
    const out = this.#asObject(pruneNulls(obj));
    for (const path of res.nullWhenAbsent ?? []) fillNulls(out, path.split("."));
    const meta = out.metadata;
    if (Array.isArray(meta.finalizers) && meta.finalizers.length === 0) delete meta.finalizers;
    for (const field of ["annotations", "labels"] as const) {
      const v = meta[field];
      if (isObject(v) && Object.keys(v).length === 0) delete meta[field];
    }
    return out;
  }

  /** Checks that a body is an object with `metadata`. */
  #asObject(body: unknown): StoredObject {
    if (!isObject(body) || !isObject(body.metadata)) {
      throw badRequest("Object 'metadata' is missing or is not an object");
    }
    const metadata = body.metadata;
    if (metadata.name !== undefined && typeof metadata.name !== "string") {
      throw badRequest("metadata.name must be a string");
    }
    return { ...body, metadata: { ...metadata, name: metadata.name ?? "" } };
  }

  /** The namespace of an object on `res`: required and consistent for namespaced resources. */
  #namespaceFor(res: ServedResource, fromUrl: string, fromBody: unknown): string {
    if (!res.namespaced) return "";
    const body = typeof fromBody === "string" ? fromBody : "";
    if (fromUrl !== "" && body !== "" && body !== fromUrl) {
      throw badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    const ns = fromUrl !== "" ? fromUrl : body;
    if (ns === "") throw badRequest("an empty namespace may not be set during creation");
    return ns;
  }

  #key(res: ServedResource, namespace: string, name: string): string {
    return `${res.group}/${res.plural}/${res.namespaced ? namespace : ""}/${name}`;
  }

  #matches(res: ServedResource, namespace: string | undefined, key: string): boolean {
    const prefix = `${res.group}/${res.plural}/`;
    if (!key.startsWith(prefix)) return false;
    if (namespace === undefined || namespace === "" || !res.namespaced) return true;
    return key.startsWith(`${prefix}${namespace}/`);
  }

  #emit(type: ChangeType, res: ServedResource, obj: StoredObject): void {
    const ev: RegistryEvent = {
      type,
      resource: res,
      object: clone(obj),
      resourceVersion: Number(obj.metadata.resourceVersion),
    };
    this.#history.push(ev);
    while (this.#history.length > this.#historyLimit) {
      const dropped = this.#history.shift();
      if (dropped !== undefined) this.#compactedRv = dropped.resourceVersion;
    }
    for (const fn of [...this.#listeners]) {
      try {
        fn(copyEvent(ev));
      } catch (err) {
        // A listener is test or demo code; its failure must not undo a committed write, but it
        // must not go unnoticed either: rethrow outside the write.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
