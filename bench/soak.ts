/**
 * `deno task bench -- --soak=N`: memory under churn. N cycles, each creating `--soak-vas`
 * VolumeAttachments (default 50) with their PersistentVolumes and driver volumes under names no
 * earlier cycle used, waiting until all are attached, deleting them, waiting until the attacher
 * detached them and released the PVs. The in-memory API server and the example driver run in
 * this process; the attacher is a child process, alone in what is measured.
 *
 * Measured after the first cycle, every `--soak-report-every` cycles and at the end; the summary
 * compares the end with the sample after `--soak-warmup` cycles (default 10: the first cycles
 * still compile code and fill caches and pools), and also gives the figures from cycle 1:
 * - our attacher (`deno run --inspect=127.0.0.1:<port> main.ts`): live heap after a full GC,
 *   read over the V8 inspector (`HeapProfiler.collectGarbage`, then `Runtime.getHeapUsage`),
 *   and RSS (`/proc/<pid>/status` VmRSS) right after that GC;
 * - every `--attacher-cmd` (e.g. the Go csi-attacher): RSS only, as nothing can force its GC
 *   from outside.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { attacherArgs, AttacherProcess } from "./attacher_process.ts";
import { ProcReader } from "./proc_stats.ts";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { ExampleDriver } from "../testkit/csi/example_driver.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../lib/kube/api.ts";
import type { PersistentVolume, VolumeAttachment } from "../lib/kube/types.ts";
import {
  driverPersistentVolume,
  driverVolumeAttachment,
} from "../testkit/harness/client_fixtures.ts";

const REPO = new URL("../", import.meta.url).pathname;
const DRIVER = "example.csi.k8s.io";
const NODE = "soak-node";
const NODE_ID = "soak-node-id";
/** Longest wait for one phase of one cycle. */
const PHASE_TIMEOUT_MS = 120_000;

/** Usage of the soak mode. */
export const SOAK_USAGE = `deno task bench -- --soak=N [options]

  --soak=N                 cycles of create / attach / delete / detach (unique names each cycle)
  --soak-vas=M             VolumeAttachments per cycle (default 50)
  --soak-report-every=K    also measure every K cycles (default 10)
  --soak-warmup=W          the summary starts after W cycles (default 10; measured there too)
  --ours=PATH              our main.ts to run (default: this checkout's)
  --attacher-cmd='CMD'     another attacher to soak after ours, RSS only (repeatable)
  --kube-api-qps=Q         client QPS and burst of every attacher (default 200)
  --worker-threads=W       (default 10)
  --out=DIR                where the JSON result goes (default bench/results)`;

/** One measurement. */
export interface SoakSample {
  cycle: number;
  /** VolumeAttachments attached and detached so far. */
  lifecycles: number;
  rssBytes: number;
  /** Live heap after a full GC (our attacher only). */
  liveHeapBytes?: number;
}

/** The soak of one attacher. */
export interface SoakResult {
  attacher: string;
  commandLine: string;
  ok: boolean;
  error?: string;
  samples: SoakSample[];
  seconds: number;
}

interface SoakOptions {
  cycles: number;
  vas: number;
  reportEvery: number;
  warmup: number;
  ours: string;
  others: string[];
  qps: number;
  workers: number;
  outDir: string;
}

function parseSoakOptions(args: string[]): SoakOptions {
  const { values } = parseArgs({
    // `deno task bench -- --soak=N` passes the `--` on.
    args: args.filter((a) => a !== "--"),
    options: {
      soak: { type: "string" },
      "soak-vas": { type: "string" },
      "soak-report-every": { type: "string" },
      "soak-warmup": { type: "string" },
      ours: { type: "string" },
      "attacher-cmd": { type: "string", multiple: true },
      "kube-api-qps": { type: "string" },
      "worker-threads": { type: "string" },
      out: { type: "string" },
    },
    strict: true,
  });
  const positive = (name: string, text: string | undefined, fallback: number) => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(`--${name} must be a positive integer, got "${text}"`);
    }
    return n;
  };
  return {
    cycles: positive("soak", values.soak, 50),
    vas: positive("soak-vas", values["soak-vas"], 50),
    reportEvery: positive("soak-report-every", values["soak-report-every"], 10),
    warmup: positive("soak-warmup", values["soak-warmup"], 10),
    ours: values.ours ?? `${REPO}main.ts`,
    others: values["attacher-cmd"] ?? [],
    qps: positive("kube-api-qps", values["kube-api-qps"], 200),
    workers: positive("worker-threads", values["worker-threads"], 10),
    outDir: values.out ?? `${REPO}bench/results`,
  };
}

function pv(name: string, volumeId: string): PersistentVolume {
  return driverPersistentVolume(name, DRIVER, volumeId);
}

function va(name: string, pvName: string): VolumeAttachment {
  return driverVolumeAttachment(name, pvName, DRIVER, NODE);
}

/** Resolves when `pred()` holds, re-checked on every change in the server; rejects after `ms`. */
function until(
  server: MemoryApiServer,
  what: string,
  pred: () => boolean,
  exited: () => boolean,
  ms = PHASE_TIMEOUT_MS,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const finish = (err?: Error) => {
      clearTimeout(timer);
      clearInterval(poll);
      unsubscribe();
      if (err) reject(err);
      else resolve();
    };
    const check = () => {
      if (pred()) finish();
      else if (exited()) finish(new Error(`the attacher exited waiting for ${what}`));
    };
    const timer = setTimeout(() => finish(new Error(`timed out waiting for ${what}`)), ms);
    const poll = setInterval(check, 500);
    const unsubscribe = server.onEvent(check);
    check();
  });
}

/** A free TCP port on 127.0.0.1. */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** Live heap after a full GC, over the V8 inspector of the process listening on `port`. */
async function liveHeapAfterGc(port: number): Promise<number> {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
    webSocketDebuggerUrl: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (url === undefined) throw new Error("the inspector lists no target");
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error("cannot connect to the inspector"));
  });
  try {
    let nextId = 1;
    const pending = new Map<number, (result: Record<string, unknown>) => void>();
    ws.onmessage = (ev) => {
      const msg = JSON.parse(String(ev.data)) as { id?: number; result?: Record<string, unknown> };
      if (msg.id !== undefined) pending.get(msg.id)?.(msg.result ?? {});
    };
    const call = (method: string) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => reject(new Error(`${method}: no answer`)), 60_000);
        pending.set(id, (result) => {
          clearTimeout(timer);
          pending.delete(id);
          resolve(result);
        });
        ws.send(JSON.stringify({ id, method }));
      });
    await call("HeapProfiler.collectGarbage");
    await call("HeapProfiler.collectGarbage");
    const usage = await call("Runtime.getHeapUsage");
    return Number(usage.usedSize);
  } finally {
    ws.close();
  }
}

/** Soaks one attacher in a fresh API server and driver. */
async function soakOne(
  label: string,
  commandLine: string,
  inspectPort: number | undefined,
  options: SoakOptions,
  proc: ProcReader,
  progress: (line: string) => void,
): Promise<SoakResult> {
  const result: SoakResult = { attacher: label, commandLine, ok: false, samples: [], seconds: 0 };
  const started = performance.now();
  const dir = await Deno.makeTempDir({ prefix: "attacher-soak-" });
  const socket = `${dir}/csi.sock`;
  const kubeconfig = `${dir}/kubeconfig`;
  const server = await MemoryApiServer.start({ compactionIntervalMs: 60_000 });
  const driver = new ExampleDriver();
  const csi = await driver.start(socket);
  let attacher: AttacherProcess | undefined;
  try {
    await Deno.writeTextFile(kubeconfig, server.kubeconfig());
    server.create(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: NODE },
      spec: { drivers: [{ name: DRIVER, nodeID: NODE_ID }] },
    });
    attacher = AttacherProcess.start(
      commandLine,
      attacherArgs({
        kubeconfig,
        csiAddress: socket,
        workerThreads: options.workers,
        kubeApiQps: options.qps,
        kubeApiBurst: options.qps,
        verbosity: 1,
      }),
      `${dir}/attacher.log`,
    );
    const p = attacher;
    const exited = () => p.exited !== undefined;
    const measure = async (cycle: number) => {
      const liveHeapBytes = inspectPort === undefined
        ? undefined
        : await liveHeapAfterGc(inspectPort);
      const rssBytes = proc.sampleTree(p.pid)?.rssBytes ?? NaN;
      const sample: SoakSample = { cycle, lifecycles: cycle * options.vas, rssBytes };
      if (liveHeapBytes !== undefined) sample.liveHeapBytes = liveHeapBytes;
      result.samples.push(sample);
      progress(`  ${label} cycle ${cycle}: ${describe(sample)}`);
    };
    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      const names = Array.from({ length: options.vas }, (_, i) => {
        const id = `c${cycle}-${String(i).padStart(3, "0")}`;
        return { va: `va-${id}`, pv: `pv-${id}`, volume: `vol-${id}` };
      });
      for (const n of names) {
        driver.createVolume(n.volume);
        server.create(PERSISTENT_VOLUMES, pv(n.pv, n.volume));
      }
      for (const n of names) server.create(VOLUME_ATTACHMENTS, va(n.va, n.pv));
      await until(
        server,
        `cycle ${cycle} attached`,
        () =>
          names.every((n) =>
            server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, n.va)?.status?.attached === true
          ),
        exited,
      );
      for (const n of names) server.delete(VOLUME_ATTACHMENTS, n.va);
      await until(
        server,
        `cycle ${cycle} detached`,
        () => names.every((n) => server.find(VOLUME_ATTACHMENTS, n.va) === undefined),
        exited,
      );
      for (const n of names) server.delete(PERSISTENT_VOLUMES, n.pv);
      await until(
        server,
        `cycle ${cycle} PVs released`,
        () => names.every((n) => server.find(PERSISTENT_VOLUMES, n.pv) === undefined),
        exited,
      );
      for (const n of names) driver.deleteVolume(n.volume);
      if (
        cycle === 1 || cycle === options.warmup || cycle === options.cycles ||
        cycle % options.reportEvery === 0
      ) {
        await measure(cycle);
      }
    }
    result.ok = true;
  } catch (err) {
    result.error = err instanceof Error ? err.message : String(err);
    if (attacher !== undefined) result.error += `\n${await attacher.logTail(15)}`;
  } finally {
    if (attacher !== undefined) await attacher.stop();
    await csi.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
    result.seconds = (performance.now() - started) / 1000;
  }
  return result;
}

const MIB = 2 ** 20;

function describe(s: SoakSample): string {
  const heap = s.liveHeapBytes === undefined
    ? ""
    : `, live heap ${(s.liveHeapBytes / MIB).toFixed(2)} MiB`;
  return `${s.lifecycles} VA lifecycles, RSS ${(s.rssBytes / MIB).toFixed(1)} MiB${heap}`;
}

/** The report: end against the sample after `warmup` cycles, and against cycle 1. */
export function summarize(r: SoakResult, warmup: number): string {
  if (!r.ok) return `${r.attacher}: FAILED: ${r.error}`;
  const last = r.samples.at(-1);
  const warm = r.samples.find((s) => s.cycle >= warmup);
  const first = r.samples[0];
  if (first === undefined || last === undefined || warm === undefined) {
    return `${r.attacher}: no sample`;
  }
  return [compare(r, warm, last), compare(r, first, last)].join("\n");
}

function compare(r: SoakResult, first: SoakSample, last: SoakSample): string {
  const rss = `RSS ${(first.rssBytes / MIB).toFixed(1)} → ${
    (last.rssBytes / MIB).toFixed(1)
  } MiB (${((last.rssBytes / first.rssBytes - 1) * 100).toFixed(1)} %)`;
  const heap = first.liveHeapBytes === undefined || last.liveHeapBytes === undefined
    ? "live heap not measured"
    : `live heap after GC ${(first.liveHeapBytes / MIB).toFixed(2)} → ${
      (last.liveHeapBytes / MIB).toFixed(2)
    } MiB (${((last.liveHeapBytes - first.liveHeapBytes) / MIB).toFixed(2)} MiB)`;
  return `${r.attacher}: cycles ${first.cycle} → ${last.cycle} (${
    last.lifecycles - first.lifecycles
  } VA lifecycles in between): ${rss}; ${heap}`;
}

/** Runs the soak; resolves with the exit status (0 when every attacher completed). */
export async function runSoak(args: string[]): Promise<number> {
  let options: SoakOptions;
  try {
    options = parseSoakOptions(args);
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n\n${SOAK_USAGE}`);
    return 2;
  }
  const progress = (line: string) => console.error(line);
  const proc = await ProcReader.create();
  const results: SoakResult[] = [];
  const port = freePort();
  const ours = `${Deno.execPath()} run --allow-all --inspect=127.0.0.1:${port} ${options.ours}`;
  progress(`Soak: ${options.cycles} cycles of ${options.vas} VolumeAttachments`);
  progress(`A: ${options.ours} (live heap over the inspector, port ${port})`);
  results.push(await soakOne("A: ours", ours, port, options, proc, progress));
  for (const [i, cmd] of options.others.entries()) {
    const label = `${String.fromCharCode(66 + i)}: ${cmd.split(/\s+/)[0]?.split("/").at(-1)}`;
    progress(`${label} = ${cmd} (RSS only)`);
    results.push(await soakOne(label, cmd, undefined, options, proc, progress));
  }
  const lines = results.map((r) => summarize(r, options.warmup));
  console.log(lines.join("\n"));
  await Deno.mkdir(options.outDir, { recursive: true });
  const file = `${options.outDir}/soak-${new Date().toISOString().replace(/[:.]/g, "-")}.json`;
  await Deno.writeTextFile(file, JSON.stringify({ options, results }, null, 2) + "\n");
  progress(`Wrote ${file}`);
  return results.every((r) => r.ok) ? 0 : 1;
}
