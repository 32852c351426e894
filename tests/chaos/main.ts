/**
 * The long chaos sweep:
 *
 *     deno task chaos -- --schedules 10000 [--seed 1] [--steps N] [--no-serialize]
 *
 * runs schedules with seeds `seed, seed+1, ...` and prints how many schedules and steps ran, how
 * many faults and user actions of each kind were injected, and every violation with its seed and
 * the trace before it. `--steps` fixes the length of the chaos phase (default: random per seed);
 * `--no-serialize` makes the driver run calls for a busy volume instead of answering ABORTED.
 *
 *     deno task chaos -- --replay <seed> [--steps N] [--no-serialize]
 *
 * replays one schedule exactly, printing its whole trace. Exits 1 when any invariant broke.
 *
 *     deno task chaos -- --cluster [--seed N] [--minutes M] [--attacher ours|go]
 *
 * runs the chaos with real processes instead (`tests/e2e/chaos/main.ts`).
 *
 * @module
 */

import { runSchedule, type ScheduleResult, type Violation } from "./simulation.ts";
import { formatViolation, summarize, type SweepSummary } from "./sweep.ts";

/** Parsed command line. */
interface Args {
  schedules: number;
  seed: number;
  steps: number | undefined;
  replay: number | undefined;
  serialize: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    schedules: 1000,
    seed: 1,
    steps: undefined,
    replay: undefined,
    serialize: true,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = Number(argv[++i]);
      if (!Number.isSafeInteger(v) || v < 0) {
        throw new RangeError(`Invalid value for ${flag}: ${argv[i]}`);
      }
      return v;
    };
    switch (flag) {
      case "--":
        break;
      case "--schedules":
        args.schedules = value();
        break;
      case "--seed":
        args.seed = value();
        break;
      case "--steps":
        args.steps = value();
        break;
      case "--replay":
        args.replay = value();
        break;
      case "--no-serialize":
        args.serialize = false;
        break;
      default:
        throw new RangeError(`Unknown flag: ${flag}`);
    }
  }
  return args;
}

async function main(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  if (args.replay !== undefined) {
    const result = await runSchedule({
      seed: args.replay,
      serializeVolumeOps: args.serialize,
      ...(args.steps !== undefined ? { chaosSteps: args.steps } : {}),
      echo: (line) => console.log(line),
    });
    console.log(JSON.stringify({ ...result, violations: result.violations.length }, null, 2));
    return result.violations.length === 0 ? 0 : 1;
  }
  const started = performance.now();
  const results: ScheduleResult[] = [];
  for (let i = 0; i < args.schedules; i++) {
    const seed = args.seed + i;
    const result = await runSchedule({
      seed,
      serializeVolumeOps: args.serialize,
      ...(args.steps !== undefined ? { chaosSteps: args.steps } : {}),
    });
    results.push(result);
    for (const v of result.violations) console.log(formatViolation(v));
    if ((i + 1) % 500 === 0) {
      console.error(`${i + 1}/${args.schedules} schedules, ${elapsed(started)}`);
    }
  }
  const summary: SweepSummary = summarize(results);
  console.log(
    `schedules: ${summary.schedules} (seeds ${args.seed}..${args.seed + args.schedules - 1})`,
  );
  console.log(
    `steps: ${summary.steps} (chaos ${summary.chaosSteps}, quiet ${summary.quiesceSteps})`,
  );
  console.log(
    `converged: ${summary.converged}/${summary.schedules} (at most ${summary.longestQuiesce} quiet steps)`,
  );
  console.log(`time: ${elapsed(started)}`);
  console.log("faults and actions:");
  for (const [kind, n] of Object.entries(summary.counts)) {
    console.log(`  ${kind.padEnd(48)} ${n}`);
  }
  console.log(`schedules stopped at an inherent window: ${summary.inherent.length}`);
  for (const w of summary.inherent) {
    console.log(`  seed ${w.seed} step ${w.step} ${w.kind}: ${w.message}`);
  }
  const violations: Violation[] = summary.violations;
  console.log(`violations: ${violations.length}`);
  for (const v of violations) {
    console.log(`  seed ${v.seed} step ${v.step} invariant ${v.invariant}: ${v.message}`);
  }
  return violations.length === 0 ? 0 : 1;
}

function elapsed(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(1)}s`;
}

if (import.meta.main) {
  // `--cluster`: the same promises checked with real processes (tests/e2e/chaos/main.ts).
  if (Deno.args.includes("--cluster")) {
    const { clusterChaosMain } = await import("../e2e/chaos/main.ts");
    Deno.exit(await clusterChaosMain(Deno.args));
  }
  Deno.exit(await main(Deno.args));
}
