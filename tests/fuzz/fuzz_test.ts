/**
 * A short fuzz run of every target with a fixed seed, in the unit suite: the long runs are
 * `deno task fuzz` (README.md).
 */

import assert from "node:assert/strict";
import { runFuzz } from "./runner.ts";
import { TARGETS } from "./targets.ts";

Deno.test("fuzz: every target, 400 inputs of seed 1, no finding", async () => {
  const reports = await runFuzz({
    targets: TARGETS,
    seed: 1,
    seconds: 40,
    inputs: 400,
    inputMs: 5000,
  });
  for (const r of reports) {
    assert.deepEqual(
      r.findings.map((f) => `${f.kind} at input ${f.index}: ${f.message} (${f.hex})`),
      [],
      r.name,
    );
    assert.equal(r.inputs, 400, `${r.name} ran every input`);
  }
  assert.deepEqual(reports.map((r) => r.name), TARGETS.map((t) => t.name));
});

Deno.test("fuzz runner: a synchronous hang, an asynchronous one and an error are findings with their input", async () => {
  const registry = new URL("./fixtures/faulty_targets.ts", import.meta.url);
  const { TARGETS: faulty } = await import(registry.href);
  const reports = await runFuzz({ targets: faulty, registry, seed: 9, seconds: 30, inputMs: 300 });
  const found = reports.map((r) => [r.name, r.findings.map((f) => [f.kind, f.hex.slice(0, 2)])]);
  assert.deepEqual(found, [
    ["loops", [["hang", "42"]]],
    ["waits", [["hang", "43"]]],
    ["throws", [["error", "44"]]],
  ]);
  for (const r of reports) {
    const f = r.findings[0]!;
    assert.equal(f.seed, 9);
    assert.ok(f.index >= 1, "a generated input, past the seed");
  }
  assert.match(reports[2]!.findings[0]!.message, /TypeError: planted/);
});
