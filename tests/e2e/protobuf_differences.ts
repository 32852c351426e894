/**
 * The protobuf probes of `deno task cluster -- --compare` and the end-to-end suite: the same
 * requests with the `Accept` and `Content-Type` of a protobuf client (client-go with
 * `ContentType = application/vnd.kubernetes.protobuf`, as the Go csi-attacher) sent to the real
 * kube-apiserver and to the in-memory one, each answer decoded with protobufjs reading the
 * upstream `.proto` files (`testkit/kube_protos.ts`) and compared as objects: zero values dropped
 * (Go writes every field that is not a pointer), then the normalization of the JSON probes (uids,
 * times and resourceVersions as placeholders, managedFields dropped, keys sorted). Status, content
 * type and the decoded body must agree (YAML answers compared as the object they hold).
 *
 * @module
 */

import yaml from "js-yaml";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import {
  KUBE_PROTOBUF,
  type KubeProtos,
  loadKubeProtos,
  withoutZeroValues,
} from "../../testkit/kube_protos.ts";
import { normalize, readChunks } from "./api_differences.ts";
import type { RawApi } from "./raw_api.ts";

const VA = "/apis/storage.k8s.io/v1/volumeattachments";
const PV = "/api/v1/persistentvolumes";
const CSINODES = "/apis/storage.k8s.io/v1/csinodes";
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const EVENTS = "/api/v1/namespaces/default/events";
/** client-go's Accept with ContentType protobuf. */
const GO_ACCEPT = `${KUBE_PROTOBUF}, */*`;
const WATCH_ACCEPT = `${KUBE_PROTOBUF};stream=watch, ${KUBE_PROTOBUF}, */*`;

/** What one server answered, as bytes. */
interface RawAnswer {
  status: number;
  contentType: string;
  bytes: Uint8Array;
  /** The stream was still open when reading stopped. */
  open?: boolean;
}

/** A server the probes run against. */
export interface PbServer {
  send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: Uint8Array | string,
  ): Promise<RawAnswer>;
  watch(path: string, headers: Record<string, string>, ms: number): Promise<RawAnswer>;
}

/** One probe. */
interface PbProbe {
  name: string;
  method: string;
  path: string;
  accept: string;
  /** A JSON-form object sent as protobuf (`protobuf: true`) or JSON; or made from the server. */
  body?: Record<string, unknown> | ((s: PbServer, codec: KubeProtos) => Promise<unknown>);
  /** The body's Content-Type; default protobuf when `body` is set. */
  contentType?: string;
  watchMs?: number;
}

function va(name: string): Record<string, unknown> {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name, labels: { probe: "protobuf" } },
    spec: {
      attacher: "diff.csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "diff-pb-pv" },
    },
  };
}

/** The current object at `path`, read in protobuf, as its JSON form. */
async function current(
  s: PbServer,
  codec: KubeProtos,
  path: string,
): Promise<Record<string, unknown>> {
  const res = await s.send("GET", path, { accept: KUBE_PROTOBUF });
  return codec.decode(res.bytes);
}

const PROBES: PbProbe[] = [
  {
    name: "pb: create a VolumeAttachment (JSON body, protobuf answer)",
    method: "POST",
    path: VA,
    accept: GO_ACCEPT,
    body: va("diff-pb-va1"),
    contentType: "application/json",
  },
  { name: "pb: get it", method: "GET", path: `${VA}/diff-pb-va1`, accept: KUBE_PROTOBUF },
  { name: "pb: list VolumeAttachments", method: "GET", path: VA, accept: GO_ACCEPT },
  {
    name: "pb: list with limit=1 (continue, remainingItemCount)",
    method: "GET",
    path: `${VA}?limit=1`,
    accept: GO_ACCEPT,
  },
  {
    name: "pb: get a missing VolumeAttachment (Status in protobuf)",
    method: "GET",
    path: `${VA}/diff-pb-missing`,
    accept: GO_ACCEPT,
  },
  {
    name: "pb: create it again (409 Status in protobuf)",
    method: "POST",
    path: VA,
    accept: GO_ACCEPT,
    body: va("diff-pb-va1"),
    contentType: "application/json",
  },
  {
    name: "pb: Accept text/html (406)",
    method: "GET",
    path: `${VA}/diff-pb-va1`,
    accept: "text/html",
  },
  {
    name: "pb: list with Accept text/html (406 of the router, stream types listed)",
    method: "GET",
    path: VA,
    accept: "text/html",
  },
  {
    name: "pb: Accept application/* (406 of the router)",
    method: "GET",
    path: `${VA}/diff-pb-va1`,
    accept: "application/*",
  },
  {
    name: "pb: Accept protobuf;stream=other (406 of the handler)",
    method: "GET",
    path: `${VA}/diff-pb-va1`,
    accept: `${KUBE_PROTOBUF};stream=other`,
  },
  {
    name: "pb: Accept protobuf after JSON at a lower q",
    method: "GET",
    path: `${VA}/diff-pb-va1`,
    accept: `application/json;q=0.5, ${KUBE_PROTOBUF}`,
  },
  {
    name: "pb: Accept JSON before protobuf at the same q",
    method: "GET",
    path: `${VA}/diff-pb-va1`,
    accept: `application/json, ${KUBE_PROTOBUF}`,
  },
  { name: "pb: Accept */*", method: "GET", path: `${VA}/diff-pb-va1`, accept: "*/*" },
  {
    name: "pb: merge patch of status (JSON patch body, protobuf answer)",
    method: "PATCH",
    path: `${VA}/diff-pb-va1/status`,
    accept: GO_ACCEPT,
    body: { status: { attached: true, attachmentMetadata: { device: "/dev/x" } } },
    contentType: "application/merge-patch+json",
  },
  {
    name: "pb: patch with a protobuf body (415)",
    method: "PATCH",
    path: `${VA}/diff-pb-va1`,
    accept: GO_ACCEPT,
    body: va("diff-pb-va1"),
  },
  {
    name: "pb: watch list, bookmarks allowed, 1 s timeout",
    method: "GET",
    path: `${VA}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
      "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    accept: WATCH_ACCEPT,
    watchMs: 3000,
  },
  {
    name: "pb: watch with Accept YAML (406)",
    method: "GET",
    path: `${VA}?watch=true&timeoutSeconds=1`,
    accept: "application/yaml",
    watchMs: 2000,
  },
  {
    name: "pb: create a PersistentVolume (Quantity, the embedded CSI source)",
    method: "POST",
    path: PV,
    accept: GO_ACCEPT,
    body: {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "diff-pb-pv" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        csi: { driver: "diff.csi.example.com", volumeHandle: "h1", fsType: "ext4" },
        storageClassName: "",
      },
    },
    contentType: "application/json",
  },
  {
    name: "pb: create a CSINode",
    method: "POST",
    path: CSINODES,
    accept: GO_ACCEPT,
    body: {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "diff-pb-node" },
      spec: {
        drivers: [{
          name: "diff.csi.example.com",
          nodeID: "n1",
          topologyKeys: ["zone"],
          allocatable: { count: 10 },
        }],
      },
    },
    contentType: "application/json",
  },
  {
    name: "pb: create a Lease with a protobuf body",
    method: "POST",
    path: LEASES,
    accept: GO_ACCEPT,
    body: {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "diff-pb-lease", namespace: "default" },
      spec: {
        holderIdentity: "replica-a",
        leaseDurationSeconds: 15,
        acquireTime: "2026-01-01T00:00:00.123456Z",
        renewTime: "2026-01-01T00:00:00.123456Z",
        leaseTransitions: 0,
      },
    },
  },
  {
    name: "pb: update the Lease with a protobuf body",
    method: "PUT",
    path: `${LEASES}/diff-pb-lease`,
    accept: GO_ACCEPT,
    body: async (s, codec) => {
      const lease = await current(s, codec, `${LEASES}/diff-pb-lease`);
      const spec = lease.spec as Record<string, unknown>;
      return { ...lease, spec: { ...spec, holderIdentity: "replica-b", leaseTransitions: 1 } };
    },
  },
  {
    name: "pb: create an Event with a protobuf body",
    method: "POST",
    path: EVENTS,
    accept: GO_ACCEPT,
    body: {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "diff-pb-event", namespace: "default" },
      involvedObject: {
        kind: "VolumeAttachment",
        name: "diff-pb-va1",
        apiVersion: "storage.k8s.io/v1",
      },
      reason: "AttachFailed",
      message: "probe",
      type: "Warning",
      count: 1,
      firstTimestamp: "2026-01-01T00:00:00Z",
      lastTimestamp: "2026-01-01T00:00:00Z",
      source: { component: "csi-attacher" },
      reportingComponent: "csi-attacher",
      reportingInstance: "probe",
    },
  },
  {
    name: "pb: delete the VolumeAttachment",
    method: "DELETE",
    path: `${VA}/diff-pb-va1`,
    accept: GO_ACCEPT,
  },
];

/** Objects the probes create on the real server. */
export const PROTOBUF_CLEANUP = [
  `${VA}/diff-pb-va1`,
  `${PV}/diff-pb-pv`,
  `${CSINODES}/diff-pb-node`,
  `${LEASES}/diff-pb-lease`,
  `${EVENTS}/diff-pb-event`,
];

/** The frames of a watch body read so far (an incomplete last frame left out). */
function frames(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let i = 0;
  while (i + 4 <= bytes.length) {
    const len = new DataView(bytes.buffer, bytes.byteOffset + i, 4).getUint32(0, false);
    if (i + 4 + len > bytes.length) break;
    out.push(bytes.subarray(i + 4, i + 4 + len));
    i += 4 + len;
  }
  return out;
}

/** An answer as comparable text: the decoded object(s), normalized. */
export function describe(codec: KubeProtos, answer: RawAnswer): string {
  const type = answer.contentType;
  const tail = answer.open ? "\n<stream still open>" : "";
  if (type.startsWith(KUBE_PROTOBUF)) {
    try {
      if (type.includes("stream=watch")) {
        return frames(answer.bytes).map((f) => {
          const ev = codec.decodeWatchEvent(f);
          return JSON.stringify(normalize(withoutZeroValues(ev)));
        }).join("\n") + tail;
      }
      return JSON.stringify(normalize(withoutZeroValues(codec.decode(answer.bytes)))) + tail;
    } catch (err) {
      return `<undecodable: ${err instanceof Error ? err.message : String(err)}>`;
    }
  }
  const text = new TextDecoder().decode(answer.bytes);
  if (type.startsWith("application/yaml")) {
    // Compared as the object it holds: go-yaml and js-yaml fold long strings differently.
    try {
      return JSON.stringify(normalize(yaml.load(text))) + tail;
    } catch {
      return text;
    }
  }
  try {
    // One JSON document, however it is indented (Go's WriteRawJSON indents a 406).
    return JSON.stringify(normalize(JSON.parse(text))) + tail;
  } catch {
    // A watch: one event a line.
  }
  return text.trim().split("\n").map((line) => {
    try {
      return JSON.stringify(normalize(JSON.parse(line)));
    } catch {
      return line;
    }
  }).join("\n") + tail;
}

function realServer(api: RawApi): PbServer {
  return {
    send: (method, path, headers, body) => api.requestBytes(method, path, headers, body),
    async watch(path, headers, ms) {
      const abort = new AbortController();
      const res = await api.stream(path, abort.signal, headers);
      return await collect(res, ms, abort);
    },
  };
}

export function fakeServer(url: string): PbServer {
  return {
    async send(method, path, headers, body) {
      const res = await fetch(`${url}${path}`, { method, headers, body: body as BodyInit });
      return {
        status: res.status,
        contentType: res.headers.get("content-type") ?? "",
        bytes: new Uint8Array(await res.arrayBuffer()),
      };
    },
    async watch(path, headers, ms) {
      const abort = new AbortController();
      const res = await fetch(`${url}${path}`, { headers, signal: abort.signal });
      return await collect(res, ms, abort);
    },
  };
}

async function collect(res: Response, ms: number, abort: AbortController): Promise<RawAnswer> {
  const chunks = await readChunks(res, ms);
  abort.abort();
  const parts = chunks.filter((c): c is Uint8Array => typeof c !== "string");
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    bytes.set(p, i);
    i += p.length;
  }
  return {
    status: res.status,
    contentType: res.headers.get("content-type") ?? "",
    bytes,
    open: chunks.some((c) => typeof c === "string"),
  };
}

async function runProbes(server: PbServer, codec: KubeProtos): Promise<RawAnswer[]> {
  const answers: RawAnswer[] = [];
  for (const probe of PROBES) {
    const headers: Record<string, string> = { accept: probe.accept };
    if (probe.watchMs !== undefined) {
      answers.push(await server.watch(probe.path, headers, probe.watchMs));
      continue;
    }
    let body: Uint8Array | string | undefined;
    if (probe.body !== undefined) {
      const value = typeof probe.body === "function" ? await probe.body(server, codec) : probe.body;
      const type = probe.contentType ?? KUBE_PROTOBUF;
      headers["content-type"] = type;
      body = type === KUBE_PROTOBUF
        ? codec.encode(value as Record<string, unknown>)
        : JSON.stringify(value);
    }
    answers.push(await server.send(probe.method, probe.path, headers, body));
  }
  return answers;
}

/** One probe's outcome. */
export interface PbOutcome {
  name: string;
  request: string;
  diffs: string[];
  real: { status: number; contentType: string; text: string };
  memory: { status: number; contentType: string; text: string };
}

/**
 * Runs the protobuf probes against the real server (as administrator, through `api`) and a fresh
 * in-memory server; removes the objects from the real one afterwards. Undefined when the `.proto`
 * files are absent.
 */
export async function compareProtobuf(api: RawApi): Promise<PbOutcome[] | undefined> {
  const codec = loadKubeProtos();
  if (codec === undefined) return undefined;
  const fake = await MemoryApiServer.start();
  try {
    return await compareServers(realServer(api), fakeServer(fake.url), codec);
  } finally {
    await fake.close();
    for (const path of PROTOBUF_CLEANUP) await api.request("DELETE", path);
  }
}

/** Runs the probes against `realOne`, then `memory`, and compares the answers. */
export async function compareServers(
  realOne: PbServer,
  memory: PbServer,
  codec: KubeProtos,
): Promise<PbOutcome[]> {
  const real = await runProbes(realOne, codec);
  const mem = await runProbes(memory, codec);
  return PROBES.map((probe, i) => {
    const r = real[i]!;
    const m = mem[i]!;
    const rt = describe(codec, r);
    const mt = describe(codec, m);
    const diffs: string[] = [];
    if (r.status !== m.status) diffs.push(`status ${r.status} vs ${m.status}`);
    if (r.contentType !== m.contentType) {
      diffs.push(`content type "${r.contentType}" vs "${m.contentType}"`);
    }
    if (rt !== mt) diffs.push("decoded body");
    // Two answers that fail to decode alike are no agreement.
    if (rt.startsWith("<undecodable") || mt.startsWith("<undecodable")) diffs.push("undecodable");
    return {
      name: probe.name,
      request: `${probe.method} ${probe.path} (Accept: ${probe.accept})`,
      diffs,
      real: { status: r.status, contentType: r.contentType, text: rt },
      memory: { status: m.status, contentType: m.contentType, text: mt },
    };
  });
}
