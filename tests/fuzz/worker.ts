/**
 * The fuzz runner's worker: runs the inputs of one target, one after the other, and publishes
 * the index of the input it is on (and how many it finished) in a shared buffer, so that the
 * runner can tell a hang, even a synchronous one, from progress, and rebuild the input.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { errorText } from "../../lib/errors.ts";
import { inputFor } from "./inputs.ts";
import type { FuzzTarget } from "./target.ts";

/** What the runner sends to start a worker. */
export interface WorkerTask {
  /** The module exporting `TARGETS` (`./targets.ts`, or a test's own). */
  registry: string;
  target: string;
  seed: number;
  /** First input index. */
  start: number;
  /** One past the last input index. */
  end: number;
  /** Stop starting new inputs after this many milliseconds. */
  budgetMs: number;
  /** Int32Array view: [0] the index being run, [1] inputs finished. */
  progress: SharedArrayBuffer;
}

/** What a worker reports. */
export type WorkerReport =
  | { kind: "finding"; index: number; error: string }
  | { kind: "done"; ran: number };

self.onmessage = async (event: MessageEvent<WorkerTask>) => {
  const task = event.data;
  const progress = new Int32Array(task.progress);
  const { TARGETS } = await import(task.registry) as { TARGETS: readonly FuzzTarget[] };
  const target = TARGETS.find((t) => t.name === task.target);
  if (target === undefined) {
    self.postMessage({ kind: "finding", index: -1, error: `no target ${task.target}` });
    return;
  }
  const seeds = target.seeds();
  const started = performance.now();
  let ran = 0;
  for (let i = task.start; i < task.end && performance.now() - started < task.budgetMs; i++) {
    Atomics.store(progress, 0, i);
    try {
      await target.run(inputFor(target, seeds, task.seed, i));
    } catch (err) {
      const stack = err instanceof Error && err.stack ? `\n${err.stack}` : "";
      self.postMessage({ kind: "finding", index: i, error: errorText(err) + stack });
      return;
    }
    ran++;
    Atomics.store(progress, 1, ran);
  }
  self.postMessage({ kind: "done", ran } satisfies WorkerReport);
};
