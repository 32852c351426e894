/**
 * The Kubernetes client's two transports side by side, HTTP/1.1 and HTTP/2 over TLS, against one
 * server in another process (Node's `http2` secure server with `allowHTTP1`, so ALPN picks the
 * protocol each client offers):
 *
 * ```sh
 * flock /tmp/heavy.lock deno run -A bench/kube_transport.ts            # N=5000, 3 rounds
 * flock /tmp/heavy.lock deno run -A bench/kube_transport.ts --n=20000 --rounds=5
 * ```
 *
 * Per round and protocol (alternating, a fresh transport each time, after one warm-up round):
 * - **start**: what a standby does at takeover, at once: a list of N PersistentVolume-like objects
 *   (about 1.3 KB of JSON each, `managedFields` included), a list of N VolumeAttachment-like ones,
 *   a small list, and three watches until their first event; the wall time until all are in, and
 *   this process's CPU time meanwhile;
 * - **steady**: 2000 merge PATCHes of about 2 KB, 10 at a time (the status and finalizer patches of
 *   attaches); this process's CPU ms per request.
 *
 * The server's `maxSessionMemory` is raised to 1000 MB: Node counts the body it holds back for
 * want of flow-control window against it (10 MB by default) and resets a large list with
 * ENHANCE_YOUR_CALM otherwise, a property of Node's server, not of the protocol.
 *
 * The server stops with this process (its stdin closes). Loopback, so the TLS handshakes cost CPU
 * but no round trips: a real network makes HTTP/1.1's extra handshakes cost more.
 *
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { createTransport } from "../lib/kube/request/transport.ts";
import type { Transport, TransportRequest } from "../lib/wire/http1/api.ts";
import { makePki } from "../testkit/pki.ts";
import { median } from "./stats.ts";

const SERVER = String.raw`
const http2 = require("node:http2");
const n = Number(process.env.N);
function item(kind, i) {
  return { metadata: { name: kind + "-" + i, uid: "0000-" + i, resourceVersion: String(1000 + i),
    managedFields: [{ manager: "kube-controller-manager", operation: "Update", apiVersion: "v1",
      time: "2026-11-28T10:00:00Z", fieldsType: "FieldsV1",
      fieldsV1: { "f:metadata": { "f:finalizers": { ".": {}, "v:\"external-attacher/csi\"": {} } },
        "f:spec": { "f:accessModes": {}, "f:capacity": { ".": {}, "f:storage": {} }, "f:csi": {} } } }] },
    spec: { csi: { driver: "io.kubernetes.storage.mock", volumeHandle: "vol-" + i, fsType: "ext4",
      volumeAttributes: { "storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-csi" } },
      accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" }, nodeName: "node-" + (i % 50) },
    status: { phase: "Bound", attached: true } };
}
const lists = {};
for (const kind of ["pv", "va"]) lists[kind] = JSON.stringify({ kind: "List", metadata: { resourceVersion: "99" }, items: Array.from({ length: n }, (_, i) => item(kind, i)) });
lists.small = JSON.stringify({ kind: "List", metadata: { resourceVersion: "99" }, items: Array.from({ length: 50 }, (_, i) => item("csinode", i)) });
const patched = JSON.stringify(item("va", 7));
const server = http2.createSecureServer({ key: process.env.KEY, cert: process.env.CERT, allowHTTP1: true, maxSessionMemory: 1000 }, (req, res) => {
  const url = new URL(req.url, "https://x");
  if (url.searchParams.get("watch") === "true") {
    res.writeHead(200, { "content-type": "application/json" });
    res.write(JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "99" } } }) + "\n");
    return;
  }
  if (req.method === "PATCH") {
    req.on("data", () => {});
    req.on("end", () => { res.setHeader("content-type", "application/json"); res.end(patched); });
    return;
  }
  res.setHeader("content-type", "application/json");
  res.end(lists[url.pathname.slice(1)] ?? "{}");
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

const { values: args } = parseArgs({
  args: Deno.args,
  options: { n: { type: "string" }, rounds: { type: "string" } },
});
const N = Number(args.n ?? 5000);
const ROUNDS = Number(args.rounds ?? 3);
const PATCHES = 2000;

const pki = await makePki("DNS:localhost,IP:127.0.0.1");
const child = new Deno.Command("node", {
  args: ["-e", SERVER],
  env: { KEY: pki.key, CERT: pki.cert, N: String(N) },
  stdin: "piped",
  stdout: "piped",
  stderr: "inherit",
}).spawn();
const reader = child.stdout.getReader();
let line = "";
while (!line.includes("\n")) {
  const { value, done } = await reader.read();
  if (done) throw new Error("the server exited");
  line += new TextDecoder().decode(value);
}
reader.releaseLock();
const base = `https://localhost:${line.trim()}`;

function transportOf(protocol: "http/1.1" | "h2"): Transport {
  return createTransport({
    server: base,
    tls: { ca: new TextEncoder().encode(pki.ca), insecureSkipTlsVerify: false },
    headers: () => Promise.resolve({}),
  }, protocol === "h2" ? { ENABLE_HTTP2: "1" } : { DISABLE_HTTP2: "1" });
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function get(signal: AbortSignal): TransportRequest {
  return { method: "GET", headers: [["Accept", "application/json"]], signal };
}

async function start(protocol: "http/1.1" | "h2"): Promise<{ ms: number; cpu: number }> {
  const t = transportOf(protocol);
  const stop = new AbortController();
  const cpu0 = cpuMs();
  const t0 = performance.now();
  const list = async (path: string) => {
    const r = await t.send(new URL(`${base}/${path}`), get(stop.signal));
    return JSON.parse(await r.text!()).items.length as number;
  };
  const watch = async (path: string) => {
    const r = await t.send(new URL(`${base}/${path}?watch=true`), get(stop.signal));
    const chunks = r.chunks!();
    await chunks.next();
    return chunks;
  };
  const [pv, va] = await Promise.all([
    list("pv"),
    list("va"),
    list("small"),
    watch("pv"),
    watch("va"),
    watch("small"),
  ]).then((r) => [r[0], r[1]]);
  const ms = performance.now() - t0;
  const cpu = cpuMs() - cpu0;
  if (pv !== N || va !== N) throw new Error("short list");
  stop.abort();
  t.close();
  return { ms, cpu };
}

async function steady(protocol: "http/1.1" | "h2"): Promise<number> {
  const t = transportOf(protocol);
  const signal = new AbortController().signal;
  const body = JSON.stringify({
    metadata: { finalizers: ["external-attacher/csi"] },
    pad: "x".repeat(1800),
  });
  const one = async () => {
    const r = await t.send(new URL(`${base}/va`), {
      method: "PATCH",
      headers: [["Content-Type", "application/merge-patch+json"], ["Accept", "application/json"]],
      body,
      signal,
    });
    JSON.parse(await r.text!());
  };
  await Promise.all(Array.from({ length: 10 }, one)); // connections open
  const cpu0 = cpuMs();
  let left = PATCHES;
  await Promise.all(Array.from({ length: 10 }, async () => {
    while (left-- > 0) await one();
  }));
  const perRequest = (cpuMs() - cpu0) / PATCHES;
  t.close();
  return perRequest;
}

const results: Record<"http/1.1" | "h2", { ms: number[]; cpu: number[]; patch: number[] }> = {
  "http/1.1": { ms: [], cpu: [], patch: [] },
  h2: { ms: [], cpu: [], patch: [] },
};
for (let round = 0; round <= ROUNDS; round++) {
  for (const protocol of ["http/1.1", "h2"] as const) {
    const s = await start(protocol);
    const p = await steady(protocol);
    if (round === 0) continue; // warm-up
    results[protocol].ms.push(s.ms);
    results[protocol].cpu.push(s.cpu);
    results[protocol].patch.push(p);
  }
}
await child.stdin.close();
await child.status;

const f = (xs: number[], d: number) =>
  `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
console.log(`N=${N}, ${ROUNDS} rounds after a warm-up, medians (min–max)`);
console.log("| figure | HTTP/1.1 | HTTP/2 |");
console.log("| --- | --- | --- |");
console.log(`| start: wall ms | ${f(results["http/1.1"].ms, 0)} | ${f(results.h2.ms, 0)} |`);
console.log(`| start: CPU ms | ${f(results["http/1.1"].cpu, 0)} | ${f(results.h2.cpu, 0)} |`);
console.log(
  `| steady: CPU ms per PATCH | ${f(results["http/1.1"].patch, 3)} | ${f(results.h2.patch, 3)} |`,
);
