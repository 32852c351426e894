/**
 * Runs fuzz targets: each in a Worker (`./worker.ts`) for its share of the time, watching the
 * shared progress counter. An input that throws is a finding; an input that makes no progress
 * for `inputMs` is a hang, caught even when it blocks the worker's thread: the worker is
 * terminated and the input rebuilt from the seed and its index. Each finding is reported with
 * its target, seed, index and bytes in hex, and written to `findingsDir`.
 *
 * @module
 */

import { inputFor, toHex } from "./inputs.ts";
import type { FuzzTarget } from "./target.ts";
import type { WorkerReport, WorkerTask } from "./worker.ts";

/** Options of {@link runFuzz}. */
export interface FuzzOptions {
  targets: readonly FuzzTarget[];
  /** The module the worker loads the targets from (by name). Default `./targets.ts`. */
  registry?: URL;
  seed: number;
  /** Total time, shared equally by the targets. */
  seconds: number;
  /** At most this many inputs per target. Default: as many as the time allows. */
  inputs?: number;
  /** Run this one input index only (to reproduce a finding). */
  index?: number;
  /** An input running longer than this is a hang. Default 2000 ms. */
  inputMs?: number;
  /** Where findings are written (created when needed); none when undefined. */
  findingsDir?: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** One finding. */
export interface Finding {
  target: string;
  seed: number;
  index: number;
  kind: "error" | "hang";
  message: string;
  hex: string;
  /** The file it was written to. */
  file?: string;
}

/** What one target did. */
export interface TargetReport {
  name: string;
  inputs: number;
  ms: number;
  findings: Finding[];
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function runTarget(
  target: FuzzTarget,
  options: FuzzOptions,
  budgetMs: number,
): Promise<TargetReport> {
  const inputMs = options.inputMs ?? 2000;
  const start = options.index ?? 0;
  const end = options.index !== undefined ? options.index + 1 : options.inputs ?? 2 ** 31 - 1;
  const sab = new SharedArrayBuffer(8);
  const progress = new Int32Array(sab);
  Atomics.store(progress, 0, start);
  const worker = new Worker(new URL("./worker.ts", import.meta.url).href, { type: "module" });
  let report: WorkerReport | undefined;
  let failed: string | undefined;
  worker.onmessage = (e: MessageEvent<WorkerReport>) => report = e.data;
  worker.onerror = (e: ErrorEvent) => {
    e.preventDefault();
    failed = e.message;
  };
  const task: WorkerTask = {
    registry: (options.registry ?? new URL("./targets.ts", import.meta.url)).href,
    target: target.name,
    seed: options.seed,
    start,
    end,
    budgetMs,
    progress: sab,
  };
  worker.postMessage(task);
  const began = performance.now();
  let lastCount = -1;
  let lastIndex = -1;
  let since = performance.now();
  const findings: Finding[] = [];
  try {
    for (;;) {
      await sleep(25);
      if (report !== undefined || failed !== undefined) break;
      const count = Atomics.load(progress, 1);
      const index = Atomics.load(progress, 0);
      if (count !== lastCount || index !== lastIndex) {
        lastCount = count;
        lastIndex = index;
        since = performance.now();
      } else if (
        performance.now() - since > inputMs && count > 0 ||
        performance.now() - since > inputMs + 30_000
      ) {
        // No input finished for inputMs (the first one may also wait for the worker to load).
        findings.push(finding(target, options, index, "hang", `no progress for ${inputMs} ms`));
        break;
      }
    }
  } finally {
    worker.terminate();
  }
  const ms = performance.now() - began;
  if (failed !== undefined) {
    findings.push(
      finding(target, options, Atomics.load(progress, 0), "error", `worker failed: ${failed}`),
    );
  } else if (report?.kind === "finding") {
    findings.push(finding(target, options, report.index, "error", report.error));
  }
  const inputs = report?.kind === "done" ? report.ran : Atomics.load(progress, 1);
  for (const f of findings) await save(f, options);
  return { name: target.name, inputs, ms, findings };
}

function finding(
  target: FuzzTarget,
  options: FuzzOptions,
  index: number,
  kind: Finding["kind"],
  message: string,
): Finding {
  const hex = index < 0 ? "" : toHex(inputFor(target, target.seeds(), options.seed, index));
  return { target: target.name, seed: options.seed, index, kind, message, hex };
}

async function save(f: Finding, options: FuzzOptions): Promise<void> {
  if (options.findingsDir === undefined) return;
  await Deno.mkdir(options.findingsDir, { recursive: true });
  f.file = `${options.findingsDir}/${f.target}-seed${f.seed}-input${f.index}.hex`;
  await Deno.writeTextFile(f.file, `${f.hex}\n`);
}

/** Runs every target of `options` in turn; see the module documentation. */
export async function runFuzz(options: FuzzOptions): Promise<TargetReport[]> {
  const reports: TargetReport[] = [];
  const budgetMs = (options.seconds * 1000) / Math.max(1, options.targets.length);
  for (const target of options.targets) {
    options.log?.(`fuzz ${target.name}: seed ${options.seed}, ${(budgetMs / 1000).toFixed(1)} s`);
    const r = await runTarget(target, options, budgetMs);
    options.log?.(
      `fuzz ${target.name}: ${r.inputs} inputs in ${
        (r.ms / 1000).toFixed(1)
      } s, ${r.findings.length} findings`,
    );
    reports.push(r);
  }
  return reports;
}
