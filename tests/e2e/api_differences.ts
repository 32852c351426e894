/**
 * Where `testkit/apiserver/server.ts` (the fake API server the unit tests use) answers differently
 * from the real kube-apiserver: the same sequence of requests is sent to both, and every answer
 * whose status, content type, `Warning` header or body (volatile values such as uids, times and
 * resourceVersions normalized) differs is reported with both answers verbatim.
 *
 * The report itself never fails; the suite fails when any probe differs.
 *
 * @module
 */

import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { RawApi } from "./raw_api.ts";
import { compareProtobuf } from "./protobuf_differences.ts";
import { kubeProtosMissing } from "../../testkit/kube_protos.ts";

/** What one server answered. */
interface Answer {
  status: number;
  contentType: string;
  warning: string;
  text: string;
}

/** One request of the probe sequence. */
interface Probe {
  name: string;
  method: string;
  path: string;
  /** Body: a value, or a function of the server (to read a current resourceVersion). */
  body?: unknown | ((s: ProbeServer) => Promise<unknown>);
  contentType?: string;
  /** Read a watch stream for this long instead of a plain request. */
  watchMs?: number;
  /** Why this probe matters. */
  note?: string;
}

/** A server the probes run against. */
interface ProbeServer {
  name: string;
  send(
    method: string,
    path: string,
    body: string | undefined,
    contentType: string | undefined,
  ): Promise<Answer>;
  watch(path: string, ms: number): Promise<Answer>;
  /** The current resourceVersion of an object, or "". */
  rv(path: string): Promise<string>;
}

const VA = "/apis/storage.k8s.io/v1/volumeattachments";
/** In a probe's path: the VolumeAttachment list's resourceVersion before the first probe. */
const START_RV = "<start-rv>";
const PV = "/api/v1/persistentvolumes";
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const CSINODES = "/apis/storage.k8s.io/v1/csinodes";
const SECRETS = "/api/v1/namespaces/default/secrets";
const JSON_PATCH = "application/json-patch+json";
const MERGE_PATCH = "application/merge-patch+json";

function va(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: {
      attacher: "diff.csi.example.com",
      nodeName: "node1",
      source: { persistentVolumeName: "diff-pv" },
    },
    ...extra,
  };
}

const PROBES: Probe[] = [
  // Reads, on objects both servers hold identically.
  { name: "create a VolumeAttachment", method: "POST", path: VA, body: va("diff-va1") },
  { name: "get it", method: "GET", path: `${VA}/diff-va1` },
  { name: "list VolumeAttachments (item kind/apiVersion)", method: "GET", path: VA },
  {
    name: "list with resourceVersion=0 (served from cache)",
    method: "GET",
    path: `${VA}?resourceVersion=0`,
  },
  { name: "get a missing VolumeAttachment", method: "GET", path: `${VA}/diff-missing` },
  { name: "create it again", method: "POST", path: VA, body: va("diff-va1") },
  {
    name: "watch without resourceVersion, bookmarks allowed, 1 s timeout",
    method: "GET",
    path: `${VA}?watch=true&allowWatchBookmarks=true&timeoutSeconds=1`,
    watchMs: 3000,
  },
  {
    name: "watch without resourceVersion, no bookmarks, 1 s timeout",
    method: "GET",
    path: `${VA}?watch=true&timeoutSeconds=1`,
    watchMs: 3000,
  },
  {
    name: "watch from the resourceVersion before the first probe (history replayed)",
    method: "GET",
    path: `${VA}?watch=true&resourceVersion=${START_RV}&timeoutSeconds=1`,
    watchMs: 3000,
  },
  {
    name: "watch with an invalid timeoutSeconds",
    method: "GET",
    path: `${VA}?watch=true&timeoutSeconds=abc`,
    watchMs: 2000,
  },
  // Status subresource.
  {
    name: "merge patch of status through the status subresource",
    method: "PATCH",
    path: `${VA}/diff-va1/status`,
    body: { status: { attached: true, attachmentMetadata: { device: "/dev/x" } } },
    contentType: MERGE_PATCH,
  },
  {
    name: "merge patch of an attachError with an errorCode through the status subresource",
    method: "PATCH",
    path: `${VA}/diff-va1/status`,
    body: {
      status: { attachError: { message: "diff", time: "2026-01-01T00:00:00Z", errorCode: 8 } },
    },
    contentType: MERGE_PATCH,
    note: "errorCode is kept from v1.35 on (MutableCSINodeAllocatableCount on by default)",
  },
  {
    name: "merge patch of status through the main resource (ignored?)",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: { status: { attached: false } },
    contentType: MERGE_PATCH,
  },
  {
    name: "merge patch of metadata through the status subresource",
    method: "PATCH",
    path: `${VA}/diff-va1/status`,
    body: { metadata: { annotations: { a: "b" }, finalizers: ["x/y"] } },
    contentType: MERGE_PATCH,
  },
  {
    name: "create with status set (dropped on create?)",
    method: "POST",
    path: VA,
    body: va("diff-va3", { status: { attached: true } }),
  },
  // JSON patch (RFC 6902) as the attacher sends it for PV finalizers.
  {
    name: "JSON patch test null on absent finalizers, then add",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: [
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "add", path: "/metadata/finalizers", value: ["external-attacher/diff"] },
    ],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch test null on present finalizers (must fail)",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: [
      { op: "test", path: "/metadata/finalizers", value: null },
      { op: "add", path: "/metadata/finalizers", value: ["other/x"] },
    ],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch test [] on present finalizers (must fail)",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: [{ op: "test", path: "/metadata/finalizers", value: [] }],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch test [] on absent finalizers (must fail)",
    method: "PATCH",
    path: `${VA}/diff-va3`,
    body: [
      { op: "test", path: "/metadata/finalizers", value: [] },
      { op: "replace", path: "/metadata/finalizers", value: ["x/y"] },
    ],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch test on a wrong finalizer index value (must fail)",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: [
      { op: "test", path: "/metadata/finalizers/0", value: "other/x" },
      { op: "remove", path: "/metadata/finalizers/0" },
    ],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch remove out of range",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: [{ op: "remove", path: "/metadata/finalizers/5" }],
    contentType: JSON_PATCH,
  },
  {
    name: "JSON patch add to the end of a missing array",
    method: "PATCH",
    path: `${VA}/diff-va3`,
    body: [{ op: "add", path: "/metadata/finalizers/-", value: "x/y" }],
    contentType: JSON_PATCH,
  },
  // Optimistic concurrency and updates.
  {
    name: "merge patch with a stale resourceVersion",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: { metadata: { resourceVersion: "1", labels: { stale: "yes" } } },
    contentType: MERGE_PATCH,
  },
  {
    name: "PUT with a stale resourceVersion",
    method: "PUT",
    path: `${VA}/diff-va1`,
    body: va("diff-va1", { metadata: { name: "diff-va1", resourceVersion: "1" } }),
  },
  {
    name: "PUT without resourceVersion (unconditional update)",
    method: "PUT",
    path: `${VA}/diff-va3`,
    body: va("diff-va3"),
  },
  {
    name: "patch a missing object",
    method: "PATCH",
    path: `${VA}/diff-missing`,
    body: { metadata: {} },
    contentType: MERGE_PATCH,
  },
  // Deletion and finalizers.
  { name: "delete an object with finalizers", method: "DELETE", path: `${VA}/diff-va1` },
  {
    name: "add a finalizer while being deleted",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: { metadata: { finalizers: ["external-attacher/diff", "new/one"] } },
    contentType: MERGE_PATCH,
  },
  {
    name: "remove the last finalizer of an object being deleted",
    method: "PATCH",
    path: `${VA}/diff-va1`,
    body: { metadata: { finalizers: null } },
    contentType: MERGE_PATCH,
  },
  { name: "get after the last finalizer went", method: "GET", path: `${VA}/diff-va1` },
  { name: "delete an object without finalizers", method: "DELETE", path: `${VA}/diff-va3` },
  { name: "delete a missing object", method: "DELETE", path: `${VA}/diff-va3` },
  // Paths and other kinds.
  { name: "unknown resource", method: "GET", path: "/apis/storage.k8s.io/v1/foos" },
  { name: "unknown group", method: "GET", path: "/apis/nothing.example.com/v1/foos" },
  {
    name: "create a PersistentVolume (defaults, status)",
    method: "POST",
    path: PV,
    body: {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "diff-pv" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        csi: { driver: "diff.csi.example.com", volumeHandle: "h1" },
      },
    },
  },
  { name: "get a missing secret", method: "GET", path: `${SECRETS}/diff-missing` },
  {
    name: "create a CSINode (an allocatable count, no topology keys)",
    method: "POST",
    path: CSINODES,
    body: {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "diff-node" },
      spec: {
        drivers: [{
          name: "diff.csi.example.com",
          nodeID: "n1",
          topologyKeys: null,
          allocatable: { count: 5 },
        }],
      },
    },
    note: "v1.37 adds CSINode status (storage health); the attacher reads spec.drivers only",
  },
  { name: "get the CSINode", method: "GET", path: `${CSINODES}/diff-node` },
  {
    name: "change a CSINode driver's allocatable count",
    method: "PATCH",
    path: `${CSINODES}/diff-node`,
    body: [{ op: "replace", path: "/spec/drivers/0/allocatable/count", value: 6 }],
    contentType: JSON_PATCH,
    note: "mutable from v1.35 on (MutableCSINodeAllocatableCount)",
  },
  {
    name: "create a Lease with a 3-digit MicroTime",
    method: "POST",
    path: LEASES,
    body: {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "diff-lease1" },
      spec: {
        holderIdentity: "a",
        leaseDurationSeconds: 15,
        renewTime: "2026-01-01T00:00:00.000Z",
      },
    },
  },
  {
    name: "create a Lease with a 6-digit MicroTime",
    method: "POST",
    path: LEASES,
    body: {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "diff-lease2" },
      spec: {
        holderIdentity: "a",
        leaseDurationSeconds: 15,
        renewTime: "2026-01-01T00:00:00.000000Z",
      },
    },
  },
  // Watch lists (client-go's WatchListClient) and the options of lists and watches.
  {
    name: "watch list: initial events, then the initial-events-end bookmark",
    method: "GET",
    path: `${PV}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
      "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    watchMs: 3000,
  },
  {
    name: "watch list from resourceVersion 0",
    method: "GET",
    path: `${PV}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
      "&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1",
    watchMs: 3000,
  },
  {
    name: "watch with sendInitialEvents=false from now",
    method: "GET",
    path: `${PV}?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan` +
      "&timeoutSeconds=1",
    watchMs: 3000,
  },
  {
    name: "watch with sendInitialEvents but no resourceVersionMatch",
    method: "GET",
    path: `${VA}?watch=true&sendInitialEvents=true&timeoutSeconds=1`,
    watchMs: 2000,
  },
  {
    name: "watch with sendInitialEvents and resourceVersionMatch=Exact",
    method: "GET",
    path: `${VA}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true` +
      "&resourceVersionMatch=Exact&timeoutSeconds=1",
    watchMs: 2000,
  },
  {
    name: "watch with resourceVersionMatch but no sendInitialEvents",
    method: "GET",
    path: `${VA}?watch=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1`,
    watchMs: 2000,
  },
  { name: "list with sendInitialEvents", method: "GET", path: `${VA}?sendInitialEvents=true` },
  {
    name: "list with resourceVersionMatch but no resourceVersion",
    method: "GET",
    path: `${VA}?resourceVersionMatch=NotOlderThan`,
  },
  {
    name: "list with a resourceVersion that is no number",
    method: "GET",
    path: `${VA}?resourceVersion=abc`,
  },
  {
    name: "watch with a resourceVersion that is no number",
    method: "GET",
    path: `${VA}?watch=true&resourceVersion=abc`,
    watchMs: 2000,
  },
  {
    name: "list from a resourceVersion not reached (3 s wait, then 504)",
    method: "GET",
    path: `${VA}?resourceVersion=999999999`,
  },
  {
    name: "list with resourceVersionMatch=Exact from resourceVersion 0",
    method: "GET",
    path: `${VA}?resourceVersion=0&resourceVersionMatch=Exact`,
  },
  {
    name: "list with resourceVersionMatch and continue",
    method: "GET",
    path: `${VA}?resourceVersion=5&resourceVersionMatch=NotOlderThan&continue=abc`,
  },
  {
    name: "list with an unsupported resourceVersionMatch",
    method: "GET",
    path: `${VA}?resourceVersion=5&resourceVersionMatch=Bogus`,
  },
  // Bodies that do not decode, or decode to something else.
  { name: "create with an empty body", method: "POST", path: VA, body: "" },
  { name: "create with a truncated JSON body", method: "POST", path: VA, body: '{"kind":' },
  { name: "create with a JSON array body", method: "POST", path: VA, body: [1] },
  { name: "create with a number as kind", method: "POST", path: VA, body: { kind: 5 } },
  {
    name: "create with another served kind",
    method: "POST",
    path: VA,
    body: { kind: "PersistentVolume", apiVersion: "v1", metadata: { name: "diff-x" } },
  },
  {
    name: "create with an unknown kind",
    method: "POST",
    path: VA,
    body: { kind: "Foo", apiVersion: "v1", metadata: { name: "diff-x" } },
  },
  {
    name: "create with another version of the group",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), apiVersion: "storage.k8s.io/v1beta1" },
  },
  {
    name: "create with an unsupported media type",
    method: "POST",
    path: VA,
    body: "kind: VolumeAttachment\n",
    contentType: "text/yaml",
  },

  {
    name: "create with a YAML list body",
    method: "POST",
    path: VA,
    body: "- a\n- b\n",
    contentType: "application/yaml",
  },
  {
    name: "create with duplicate keys in YAML and fieldValidation=Strict",
    method: "POST",
    path: `${VA}?fieldValidation=Strict`,
    body: "kind: VolumeAttachment\napiVersion: storage.k8s.io/v1\nmetadata:\n  name: diff-x\n" +
      "  bogus: 1\n  labels:\n    a: b\n    a: c\nspec:\n  attacher: a\n  nodeName: node1\n" +
      "  zz: 1\n  source:\n    persistentVolumeName: p\n",
    contentType: "application/yaml",
  },
  {
    name: "create with duplicate JSON fields and fieldValidation=Strict",
    method: "POST",
    path: `${VA}?fieldValidation=Strict`,
    body: '{"kind":"VolumeAttachment","apiVersion":"storage.k8s.io/v1","metadata":{"name":' +
      '"diff-x","bogus":1,"name":"diff-x"},"spec":{"attacher":"a","nodeName":"n","zz":1,' +
      '"source":{"persistentVolumeName":"p"}}}',
  },
  {
    name: "create with a number as spec.attacher",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), spec: { ...va("x").spec as object, attacher: 5 } },
  },
  {
    name: "create with a string as spec",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), spec: "s" },
  },
  {
    name: "create from YAML with a label `yes` (a YAML 1.1 bool)",
    method: "POST",
    path: VA,
    body: "kind: VolumeAttachment\napiVersion: storage.k8s.io/v1\nmetadata:\n  name: diff-x\n" +
      "  labels:\n    a: yes\nspec:\n  attacher: a\n  nodeName: node1\n  source:\n" +
      "    persistentVolumeName: p\n",
    contentType: "application/yaml",
  },
  // Validation of VolumeAttachments.
  {
    name: "create with an attacher that is no DNS subdomain",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), spec: { ...va("x").spec as object, attacher: "csi/test" } },
  },
  {
    name: "create with a node name that is no DNS subdomain",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), spec: { ...va("x").spec as object, nodeName: "Node_1" } },
  },
  { name: "create with an empty spec", method: "POST", path: VA, body: { ...va("x"), spec: {} } },
  {
    name: "create with an uppercase attacher and no source",
    method: "POST",
    path: VA,
    body: { ...va("diff-x"), spec: { attacher: "A.B", nodeName: "n", source: {} } },
  },
  {
    name: "create with a 260-character attacher and node name",
    method: "POST",
    path: VA,
    body: {
      ...va("diff-x"),
      spec: {
        attacher: "a".repeat(260),
        nodeName: "b".repeat(260),
        source: { persistentVolumeName: "p" },
      },
    },
  },
  {
    name: "create with a name that is no DNS subdomain",
    method: "POST",
    path: VA,
    body: va("Diff_X"),
  },

  // Last: requests after which the two servers hold different objects.
  {
    name: "create a VolumeAttachment for patch formats",
    method: "POST",
    path: VA,
    body: va("diff-va4"),
  },
  {
    name: "strategic merge patch",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: { metadata: { labels: { smp: "yes" } } },
    contentType: "application/strategic-merge-patch+json",
  },
  {
    name: "JSON patch that is not an array",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: { op: "add" },
    contentType: JSON_PATCH,
  },
  {
    name: "merge patch body that is not JSON",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: "{not json",
    contentType: MERGE_PATCH,
  },
  {
    name: "create with an unknown field (field validation)",
    method: "POST",
    path: VA,
    body: { ...va("diff-va2"), spec: { ...va("x").spec as object, bogus: 1 } },
  },
  {
    name: "create with an unknown field and fieldValidation=Strict",
    method: "POST",
    path: `${VA}?fieldValidation=Strict`,
    body: { ...va("diff-va5"), spec: { ...va("x").spec as object, bogus: 1 } },
  },
  {
    name: "create without spec.attacher (validation)",
    method: "POST",
    path: VA,
    body: {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "diff-invalid" },
      spec: { nodeName: "n", source: { persistentVolumeName: "p" } },
    },
  },
  {
    name: "create with a YAML body",
    method: "POST",
    path: VA,
    body: "apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata:\n  name: diff-yaml\n" +
      "spec:\n  attacher: diff.csi.example.com\n  nodeName: node1\n  source:\n" +
      "    persistentVolumeName: diff-pv\n",
    contentType: "application/yaml",
  },
  {
    name: "patch with a media type no patch route takes",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: "metadata: {labels: {a: b}}",
    contentType: "application/yaml",
  },
  {
    name: "change the node of a VolumeAttachment (spec is immutable)",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: { spec: { nodeName: "node2" } },
    contentType: MERGE_PATCH,
  },
  {
    name: "empty the attacher of a VolumeAttachment",
    method: "PATCH",
    path: `${VA}/diff-va4`,
    body: { spec: { attacher: "" } },
    contentType: MERGE_PATCH,
  },
];

/**
 * Placeholders for values that differ between any two runs; `managedFields` dropped (the fake
 * never writes them; noted once in the report) and keys sorted.
 */
export function normalize(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((v) => normalize(v));
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (k === "managedFields") continue;
      out[k] = normalize(v, k);
    }
    // Key order carries no meaning in JSON: compare sorted.
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0));
  }
  if (typeof value === "string") {
    if (key === "uid") return "<uid>";
    if (key === "resourceVersion") return "<rv>";
    if (/Timestamp$|Time$|^time$/.test(key)) return "<time>";
    return value
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
      .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g, "<uid>")
      .replace(/resource version: \d+ \(\d+\)/g, "resource version: <rv> (<rv>)")
      .replace(/current: \d+/g, "current: <rv>");
  }
  return value;
}

function normalizeText(text: string): string {
  const lines = text.trim().split("\n").map((line) => {
    try {
      return JSON.stringify(normalize(JSON.parse(line)));
    } catch (err) {
      if (err instanceof SyntaxError) return line;
      throw err;
    }
  });
  return lines.join("\n");
}

async function readStream(res: Response, ms: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (const chunk of await readChunks(res, ms)) {
    text += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
  }
  return text;
}

/**
 * The chunks of a streaming body read for up to `ms`, then `"\n<stream still open>"` when it
 * had not ended.
 */
export async function readChunks(res: Response, ms: number): Promise<(Uint8Array | string)[]> {
  const reader = res.body?.getReader();
  if (reader === undefined) return [];
  const text: (Uint8Array | string)[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const chunk = await Promise.race([
      reader.read(),
      new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), left);
      }),
    ]);
    clearTimeout(timer);
    if (chunk === "timeout") {
      text.push("\n<stream still open>");
      break;
    }
    if (chunk.done) break;
    text.push(chunk.value);
  }
  await reader.cancel();
  return text;
}

function realServer(api: RawApi): ProbeServer {
  return {
    name: "kube-apiserver",
    async send(method, path, body, contentType) {
      const res = await api.request(method, path, {
        body,
        contentType,
      });
      return {
        status: res.status,
        contentType: res.contentType,
        warning: res.warning,
        text: res.text,
      };
    },
    async watch(path, ms) {
      const abort = new AbortController();
      const res = await api.stream(path, abort.signal);
      const text = await readStream(res, ms);
      abort.abort();
      return {
        status: res.status,
        contentType: res.headers.get("content-type") ?? "",
        warning: res.headers.get("warning") ?? "",
        text,
      };
    },
    async rv(path) {
      const res = await api.request("GET", path);
      return (res.json as { metadata?: { resourceVersion?: string } })?.metadata?.resourceVersion ??
        "";
    },
  };
}

function fakeServer(url: string): ProbeServer {
  const answer = async (res: Response, text?: string): Promise<Answer> => ({
    status: res.status,
    contentType: res.headers.get("content-type") ?? "",
    warning: res.headers.get("warning") ?? "",
    text: text ?? await res.text(),
  });
  return {
    name: "memory_apiserver",
    async send(method, path, body, contentType) {
      const headers: Record<string, string> = {};
      if (body !== undefined) headers["content-type"] = contentType ?? "application/json";
      return await answer(await fetch(`${url}${path}`, { method, headers, body }));
    },
    async watch(path, ms) {
      const abort = new AbortController();
      const res = await fetch(`${url}${path}`, { signal: abort.signal });
      const text = await readStream(res, ms);
      abort.abort();
      return await answer(res, text);
    },
    async rv(path) {
      const res = await fetch(`${url}${path}`);
      const obj = await res.json() as { metadata?: { resourceVersion?: string } };
      return obj?.metadata?.resourceVersion ?? "";
    },
  };
}

async function runProbes(server: ProbeServer): Promise<Answer[]> {
  const answers: Answer[] = [];
  // The resourceVersion before the first probe, for paths that watch from there.
  const startRv = await server.rv(VA);
  for (const probe of PROBES) {
    const path = probe.path.replace(START_RV, startRv);
    if (probe.watchMs !== undefined) {
      answers.push(await server.watch(path, probe.watchMs));
      continue;
    }
    const raw = typeof probe.body === "function"
      ? await (probe.body as (s: ProbeServer) => Promise<unknown>)(server)
      : probe.body;
    const body = raw === undefined
      ? undefined
      : typeof raw === "string"
      ? raw
      : JSON.stringify(raw);
    answers.push(await server.send(probe.method, path, body, probe.contentType));
  }
  return answers;
}

/** ` — "<message>"` of a Status body, "" otherwise. */
function statusMessage(text: string): string {
  try {
    const obj = JSON.parse(text) as { kind?: string; message?: string };
    return obj.kind === "Status" && obj.message ? ` — \`${obj.message}\`` : "";
  } catch (err) {
    if (err instanceof SyntaxError) return "";
    throw err;
  }
}

function managerOf(text: string): string {
  try {
    const obj = JSON.parse(text) as { metadata?: { managedFields?: { manager?: string }[] } };
    return obj.metadata?.managedFields?.[0]?.manager ?? "";
  } catch (err) {
    if (err instanceof SyntaxError) return "";
    throw err;
  }
}

/** The outcome of {@link compareWithMemoryApiServer}. */
export interface DifferenceReport {
  /** The real server's `/version` `gitVersion`, e.g. `v1.37.2`. */
  serverVersion: string;
  /** Number of probes sent to each server. */
  probes: number;
  /** Number of probes whose answers differ. */
  differences: number;
  /** Every probe with both answers (differences first). */
  markdown: string;
  /** One line per differing probe: its name and what differs. */
  summary: string[];
}

const CLEANUP = [
  `${VA}/diff-va1`,
  `${VA}/diff-va2`,
  `${VA}/diff-va3`,
  `${VA}/diff-va4`,
  `${VA}/diff-va5`,
  `${VA}/diff-yaml`,
  `${VA}/diff-invalid`,
  `${VA}/diff-x`,
  `${VA}/Diff_X`,
  `${PV}/diff-pv`,
  `${LEASES}/diff-lease1`,
  `${LEASES}/diff-lease2`,
  `${CSINODES}/diff-node`,
];

/**
 * Runs the probes against the real server (through `api`, as administrator) and a fresh
 * in-memory server, and describes the differences. Objects named `diff-*` are removed from the
 * real server afterwards.
 */
export async function compareWithMemoryApiServer(api: RawApi): Promise<DifferenceReport> {
  const version = await api.request("GET", "/version");
  const serverVersion = (version.json as { gitVersion?: string } | undefined)?.gitVersion ?? "?";
  const fake = await MemoryApiServer.start();
  let real: Answer[];
  let mem: Answer[];
  try {
    real = await runProbes(realServer(api));
    mem = await runProbes(fakeServer(fake.url));
  } finally {
    await fake.close();
    for (const path of CLEANUP) {
      await api.request("PATCH", path, {
        body: { metadata: { finalizers: null } },
        contentType: MERGE_PATCH,
      });
      await api.request("DELETE", path);
    }
  }
  const sections: string[] = [];
  const summary: string[] = [];
  const same: string[] = [];
  let differences = 0;
  PROBES.forEach((probe, i) => {
    const r = real[i]!;
    const m = mem[i]!;
    const diffs: string[] = [];
    if (r.status !== m.status) diffs.push(`status ${r.status} vs ${m.status}`);
    if (r.contentType !== m.contentType) {
      diffs.push(`content type "${r.contentType}" vs "${m.contentType}"`);
    }
    if (r.warning !== m.warning) diffs.push(`Warning header "${r.warning}" vs "${m.warning}"`);
    if (normalizeText(r.text) !== normalizeText(m.text)) diffs.push("body");
    const request = `${probe.method} ${probe.path}` +
      (probe.contentType ? ` (${probe.contentType})` : "") +
      (probe.body !== undefined && typeof probe.body !== "function"
        ? `\n  body: ${typeof probe.body === "string" ? probe.body : JSON.stringify(probe.body)}`
        : "");
    if (diffs.length === 0) {
      same.push(`- ${probe.name}: HTTP ${r.status}${statusMessage(r.text)}`);
      return;
    }
    differences++;
    summary.push(`${probe.name}: ${diffs.join("; ")}`);
    sections.push([
      `### ${probe.name}`,
      "",
      "```",
      request,
      "```",
      "",
      `Differs in: ${diffs.join("; ")}.`,
      "",
      `kube-apiserver: HTTP ${r.status}, \`${r.contentType}\`${
        r.warning ? `, Warning: \`${r.warning}\`` : ""
      }`,
      "",
      "```",
      r.text.trim(),
      "```",
      "",
      `memory_apiserver: HTTP ${m.status}, \`${m.contentType}\`${
        m.warning ? `, Warning: \`${m.warning}\`` : ""
      }`,
      "",
      "```",
      m.text.trim(),
      "```",
      "",
    ].join("\n"));
  });
  // The same requests as a protobuf client makes them (tests/e2e/protobuf_differences.ts).
  const pb = await compareProtobuf(api);
  for (const o of pb ?? []) {
    if (o.diffs.length === 0) {
      same.push(`- ${o.name}: HTTP ${o.real.status} \`${o.real.contentType}\``);
      continue;
    }
    differences++;
    summary.push(`${o.name}: ${o.diffs.join("; ")}`);
    sections.push([
      `### ${o.name}`,
      "",
      "```",
      o.request,
      "```",
      "",
      `Differs in: ${o.diffs.join("; ")}.`,
      "",
      `kube-apiserver: HTTP ${o.real.status}, \`${o.real.contentType}\`, decoded:`,
      "",
      "```",
      o.real.text,
      "```",
      "",
      `memory_apiserver: HTTP ${o.memory.status}, \`${o.memory.contentType}\`, decoded:`,
      "",
      "```",
      o.memory.text,
      "```",
      "",
    ].join("\n"));
  }
  const probes = PROBES.length + (pb?.length ?? 0);
  const general: string[] = [];
  if (pb === undefined) {
    general.push(`- The protobuf probes did not run: ${kubeProtosMissing()}.`);
  } else {
    general.push(
      `- ${pb.length} of the probes (\`pb:\`) are sent as a protobuf client sends them and their ` +
        "answers decoded from protobuf, zero values dropped, before comparing.",
    );
  }
  if (/"managedFields"/.test(real[0]!.text) && !/"managedFields"/.test(mem[0]!.text)) {
    general.push(
      "- kube-apiserver returns `metadata.managedFields` on every object (here manager " +
        `\`${managerOf(real[0]!.text)}\`, taken from the User-Agent); the fake never writes them.`,
    );
  }
  general.push(
    "- Key order differs (the real server writes Go struct order, e.g. Status `details` before " +
      "`code`, VolumeAttachment `spec.source` before `spec.nodeName`); ignored below.",
  );
  const markdown = [
    `# kube-apiserver ${serverVersion} vs testkit/apiserver/server.ts`,
    "",
    `${differences} of ${probes} probes differ (values of uid, times and resourceVersion ` +
    "normalized, managedFields dropped and keys sorted before comparing bodies).",
    "",
    ...general,
    "",
    ...sections,
    "## Same answers",
    "",
    ...same,
    "",
  ].join("\n");
  return { serverVersion, probes, differences, markdown, summary };
}
