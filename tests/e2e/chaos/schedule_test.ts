import assert from "node:assert/strict";
import {
  countKinds,
  describeFault,
  drawSchedule,
  FAULT_KINDS,
  PAUSE_MAX_MS,
  PAUSE_MIN_MS,
} from "./schedule.ts";

Deno.test("drawSchedule() gives the same schedule for the same seed, another for another", () => {
  const a = drawSchedule(7, { phaseMs: 150_000, replicas: 3 });
  assert.deepEqual(drawSchedule(7, { phaseMs: 150_000, replicas: 3 }), a);
  assert.notDeepEqual(drawSchedule(8, { phaseMs: 150_000, replicas: 3 }), a);
});

Deno.test("drawSchedule() holds every kind, in order, inside the phase and its bounds", () => {
  for (let seed = 1; seed <= 50; seed++) {
    const faults = drawSchedule(seed, { phaseMs: 150_000, replicas: 3 });
    const counts = countKinds(faults);
    for (const kind of FAULT_KINDS) assert.ok(counts[kind] >= 1, `seed ${seed}: no ${kind}`);
    for (const [i, f] of faults.entries()) {
      assert.ok(f.at >= 1_000 && f.at <= 145_000, `seed ${seed}: fault at ${f.at}`);
      if (i > 0) assert.ok(f.at >= faults[i - 1]!.at + 1_000);
      if (f.kind === "pause") {
        assert.ok(f.durationMs >= PAUSE_MIN_MS && f.durationMs <= PAUSE_MAX_MS);
      }
      if (f.kind === "pause" || f.kind === "kill") {
        assert.ok(f.target === "leader" || (f.target! >= 0 && f.target! < 3));
      } else assert.equal(f.target, undefined);
    }
  }
});

Deno.test("drawSchedule() refuses a phase too short to hold anything", () => {
  assert.throws(() => drawSchedule(1, { phaseMs: 5_000, replicas: 3 }), RangeError);
});

Deno.test("describeFault() names kind, target and length", () => {
  assert.equal(
    describeFault({ at: 12_340, kind: "pause", target: "leader", durationMs: 14_200 }),
    "+12.3 s pause leader 14.2 s",
  );
  assert.equal(
    describeFault({ at: 1_000, kind: "kill", target: 2, durationMs: 0 }),
    "+1.0 s kill replica 2",
  );
  assert.equal(
    describeFault({ at: 2_000, kind: "driver-restart", durationMs: 500 }),
    "+2.0 s driver-restart down 0.5 s",
  );
});
