/**
 * The sandbox's timeline: one numbered line per finished API request, finished CSI call and
 * sandbox action, written as they happen.
 *
 * ```
 *   4  API      patch volumeattachments/va-1  merge: metadata.annotations={...}, metadata.finalizers=[...]
 *   5  CSI      ControllerPublishVolume(volumeId=vol-1, nodeId=node-1, ...) → OK publishContext={...}
 * ```
 *
 * Informer lists and watches and the periodic ListVolumes reconciliation are left out: they
 * are reads whose timing varies from run to run, and the timeline is meant to read the same
 * every time.
 *
 * @module
 */

import type { Patch } from "../lib/kube/api.ts";
import type { CsiCallEvent } from "./csi_call_tap.ts";
import type { ApiCallRecord } from "./recording_kube_api.ts";

/** Longest value shown in full; longer ones are cut with `…`. */
const MAX_VALUE_LENGTH = 120;

/** Methods the timeline does not show (see the module documentation). */
const HIDDEN_METHODS: ReadonlySet<string> = new Set(["ListVolumes"]);

/** A value as shown: strings bare, everything else compact JSON, cut to a readable length. */
export function showValue(value: unknown): string {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  return text.length > MAX_VALUE_LENGTH ? `${text.slice(0, MAX_VALUE_LENGTH - 1)}…` : text;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `[path, value]` pairs of a merge patch, flattened to at most two levels (`status.attached`). */
function mergeLeaves(body: unknown, prefix: string, depth: number): [string, unknown][] {
  if (!isPlainObject(body) || depth === 0) return [[prefix, body]];
  const out: [string, unknown][] = [];
  for (const [key, value] of Object.entries(body)) {
    const path = prefix === "" ? key : `${prefix}.${key}`;
    if (isPlainObject(value) && Object.keys(value).length > 0) {
      out.push(...mergeLeaves(value, path, depth - 1));
    } else {
      out.push([path, value]);
    }
  }
  return out;
}

/**
 * A one-line summary of a patch.
 *
 * @example
 * ```ts
 * summarizePatch({ type: "merge", body: { status: { attached: true } } });
 * // "merge: status.attached=true"
 * summarizePatch({ type: "json", body: [{ op: "remove", path: "/metadata/finalizers/0" }] });
 * // "json: remove /metadata/finalizers/0"
 * ```
 */
export function summarizePatch(patch: Patch): string {
  if (patch.type === "json") {
    const ops = patch.body.map((op) => {
      const target = op.from === undefined ? op.path : `${op.from} → ${op.path}`;
      return "value" in op ? `${op.op} ${target}=${showValue(op.value)}` : `${op.op} ${target}`;
    });
    return `json: ${ops.join("; ")}`;
  }
  const leaves = mergeLeaves(patch.body, "", 2);
  if (leaves.length === 0) return "merge: {} (no change)";
  // A uid in a patch is a precondition (the object must still be the one the attacher saw), not
  // a change; it is random, so the timeline names it instead of printing it.
  const shown = leaves.map(([path, value]) =>
    path === "metadata.uid" ? "(only if uid unchanged)" : `${path}=${showValue(value)}`
  );
  return `merge: ${shown.join(", ")}`;
}

/** True for a merge patch that sets `status.attached` to false (the attacher's markAsDetached). */
function isDetachStatus(patch: Patch | undefined): boolean {
  if (patch?.type !== "merge" || !isPlainObject(patch.body)) return false;
  const status = patch.body.status;
  return isPlainObject(status) && status.attached === false;
}

/** `resource/name` or `resource/namespace/name`, plus `/status`. */
function objectPath(record: ApiCallRecord): string {
  const parts = [record.resource];
  if (record.namespace !== "") parts.push(record.namespace);
  if (record.name !== "") parts.push(record.name);
  if (record.subresource !== "") parts.push(record.subresource);
  return parts.join("/");
}

/**
 * The timeline text of a finished API request, or undefined for the requests the timeline does
 * not show (lists).
 */
export function describeApiCall(record: ApiCallRecord): string | undefined {
  if (record.verb === "list") return undefined;
  let text = `${record.verb} ${objectPath(record)}`;
  if (record.patch !== undefined) text += `  ${summarizePatch(record.patch)}`;
  const outcome = record.outcome;
  if (!outcome.ok) {
    const code = outcome.code === 0 ? "no answer" : `${outcome.code} ${outcome.reason}`;
    text += `  → ${code}: ${outcome.message}`;
    if (outcome.code === 404 && record.subresource === "status" && isDetachStatus(record.patch)) {
      text += " (the object is gone: counts as detached)";
    }
  }
  return text;
}

function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null || value === "") return true;
  if (Array.isArray(value)) return value.length === 0;
  if (isPlainObject(value)) return Object.keys(value).length === 0;
  return false;
}

/** `mount(fsType=ext4) SINGLE_NODE_WRITER` or `block MULTI_NODE_MULTI_WRITER`. */
function describeCapability(cap: unknown): string {
  if (!isPlainObject(cap)) return showValue(cap);
  let access = "?";
  if (isPlainObject(cap.block)) access = "block";
  if (isPlainObject(cap.mount)) {
    const details = Object.entries(cap.mount)
      .filter(([, v]) => !isEmpty(v))
      .map(([k, v]) => `${k}=${showValue(v)}`);
    access = details.length > 0 ? `mount(${details.join(", ")})` : "mount";
  }
  const mode = isPlainObject(cap.accessMode) ? cap.accessMode.mode : undefined;
  return mode === undefined ? access : `${access} ${String(mode)}`;
}

/** The names in a capabilities list (`CONTROLLER_SERVICE`, `PUBLISH_UNPUBLISH_VOLUME`, …). */
function capabilityNames(list: unknown): string {
  if (!Array.isArray(list)) return showValue(list);
  const names = list.map((entry) => {
    if (!isPlainObject(entry)) return showValue(entry);
    for (const key of ["service", "rpc", "volumeExpansion"]) {
      const member = entry[key];
      if (isPlainObject(member) && member.type !== undefined) return String(member.type);
    }
    return showValue(entry);
  });
  return names.length === 0 ? "(none)" : names.join(", ");
}

/** `key=value` pairs of a request or response; empty values are left out, booleans kept. */
function describeFields(message: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(message)) {
    if (typeof value !== "boolean" && isEmpty(value)) continue;
    if (key === "volumeCapability") out.push(`capability=${describeCapability(value)}`);
    else if (key === "capabilities") out.push(capabilityNames(value));
    else if (key === "ready" && isPlainObject(value)) out.push(`ready=${String(value.value)}`);
    else out.push(`${key}=${showValue(value)}`);
  }
  return out;
}

/**
 * The timeline text of a finished CSI call, from its request and its outcome.
 *
 * @example
 * ```ts
 * describeCsiCall("Probe", {}, { kind: "response", method: "Probe", response: { ready: { value: true } } });
 * // "Probe() → OK ready=true"
 * ```
 */
export function describeCsiCall(
  method: string,
  request: Record<string, unknown>,
  outcome: Exclude<CsiCallEvent, { kind: "call" }>,
): string {
  const call = `${method}(${describeFields(request).join(", ")})`;
  if (outcome.kind === "error") return `${call} → ${outcome.error}`;
  const fields = describeFields(outcome.response);
  return fields.length === 0 ? `${call} → OK` : `${call} → OK ${fields.join(" ")}`;
}

/** Where a timeline line comes from. */
export type TimelineSource = "sandbox" | "API" | "CSI";

/**
 * Numbers and writes timeline lines. CSI calls are written when they finish, with their request;
 * API requests when they finish, with their outcome.
 */
export class Timeline {
  readonly #write: (line: string) => void;
  #count = 0;
  /** Requests of CSI calls in flight, per method, oldest first. */
  readonly #pending = new Map<string, Record<string, unknown>[]>();
  readonly #hidden: ReadonlySet<string>;

  /**
   * @param deps.write receives each line, without a trailing newline
   * @param options.showListVolumes shows ListVolumes calls too (hidden by default: see the
   *   module documentation)
   */
  constructor(
    deps: { write: (line: string) => void },
    options: { showListVolumes?: boolean } = {},
  ) {
    this.#write = deps.write;
    this.#hidden = options.showListVolumes ? new Set() : HIDDEN_METHODS;
  }

  /** Number of lines written so far. */
  get length(): number {
    return this.#count;
  }

  /** Writes one numbered line. */
  line(source: TimelineSource, text: string): void {
    this.#count += 1;
    this.#write(`${String(this.#count).padStart(3)}  ${source.padEnd(7)}  ${text}`);
  }

  /** Records a finished API request (lists are skipped). */
  api(record: ApiCallRecord): void {
    const text = describeApiCall(record);
    if (text !== undefined) this.line("API", text);
  }

  /** Records a step of a CSI call; a line is written when the call finishes. */
  csi(event: CsiCallEvent): void {
    if (this.#hidden.has(event.method)) return;
    if (event.kind === "call") {
      const queue = this.#pending.get(event.method) ?? [];
      queue.push(event.request);
      this.#pending.set(event.method, queue);
      return;
    }
    const request = this.#pending.get(event.method)?.shift() ?? {};
    this.line("CSI", describeCsiCall(event.method, request, event));
  }
}
