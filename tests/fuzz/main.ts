/**
 * `deno task fuzz`: runs the fuzz targets of `./targets.ts` (see `./README.md`).
 *
 * ```sh
 * deno task fuzz                                   # every target, 60 s in all, a random seed
 * deno task fuzz --seconds=600 --seed=7            # longer, reproducible
 * deno task fuzz --target=hpack --inputs=100000    # one target, a number of inputs
 * deno task fuzz --target=hpack --seed=7 --index=1234   # replay one input
 * ```
 *
 * Flags: `--seconds=N` (total, shared by the targets; default 60), `--seed=S` (default: from the
 * clock, printed), `--target=name` (repeatable, or a comma list; default all), `--inputs=N` (at
 * most per target), `--index=N` (only that input), `--input-ms=N` (an input taking longer is a
 * hang; default 2000), `--out=dir` (where findings go; default `tests/fuzz/findings`, ignored by
 * git). Exits 1 on a finding, after printing its target, seed, index and input as hex.
 *
 * @module
 */

import { runFuzz } from "./runner.ts";
import { TARGETS } from "./targets.ts";

/** The arguments, without the `--` that `deno task fuzz -- …` passes on. */
const ARGS = Deno.args.filter((arg) => arg !== "--");

function flag(name: string): string[] {
  const out: string[] = [];
  for (const arg of ARGS) {
    if (arg.startsWith(`--${name}=`)) out.push(...arg.slice(name.length + 3).split(","));
  }
  return out;
}

function number(name: string, fallback: number | undefined): number | undefined {
  const value = flag(name).at(-1);
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new Error(`--${name} wants an integer, not ${value}`);
  return n;
}

const known = new Set(["seconds", "seed", "target", "inputs", "index", "input-ms", "out"]);
for (const arg of ARGS) {
  const name = /^--([a-z-]+)=/.exec(arg)?.[1];
  if (name === undefined || !known.has(name)) {
    console.error(`unknown argument ${arg}; see tests/fuzz/README.md`);
    Deno.exit(2);
  }
}
const names = flag("target");
const targets = names.length === 0 ? TARGETS : names.map((n) => {
  const t = TARGETS.find((t) => t.name === n);
  if (t === undefined) {
    console.error(`no target ${n}; targets: ${TARGETS.map((t) => t.name).join(", ")}`);
    Deno.exit(2);
  }
  return t;
});
const seed = number("seed", undefined) ?? (Date.now() % 2 ** 31);
const reports = await runFuzz({
  targets,
  seed,
  seconds: number("seconds", 60)!,
  inputs: number("inputs", undefined),
  index: number("index", undefined),
  inputMs: number("input-ms", 2000),
  findingsDir: flag("out").at(-1) ?? new URL("./findings", import.meta.url).pathname,
  log: (line) => console.log(line),
});
let findings = 0;
for (const r of reports) {
  for (const f of r.findings) {
    findings++;
    console.log(`\nFINDING ${f.kind} in ${f.target}: seed ${f.seed}, input ${f.index}`);
    console.log(f.message);
    console.log(`input (${f.hex.length / 2} octets): ${f.hex}`);
    if (f.file !== undefined) console.log(`written to ${f.file}`);
    console.log(`replay: deno task fuzz --target=${f.target} --seed=${f.seed} --index=${f.index}`);
  }
}
const total = reports.reduce((n, r) => n + r.inputs, 0);
console.log(`\n${total} inputs, ${findings} findings, seed ${seed}`);
Deno.exit(findings > 0 ? 1 : 0);
