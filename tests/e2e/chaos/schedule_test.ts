import assert from "node:assert/strict";
import {
  countKinds,
  describeFault,
  drawSchedule,
  DRIVER_FAIL_CODES,
  FAULT_KINDS,
  IN_PUBLISH_PAUSE_MIN_MS,
  PARTITION_MAX_MS,
  PARTITION_MIN_MS,
  PAUSE_MAX_MS,
  PAUSE_MIN_MS,
  REPLICA_KINDS,
  SLOW_MAX_DELAY_MS,
  SLOW_MIN_DELAY_MS,
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
    if (faults.length >= FAULT_KINDS.length) {
      for (const kind of FAULT_KINDS) assert.ok(counts[kind] >= 1, `seed ${seed}: no ${kind}`);
    } else {
      const kinds = new Set(faults.map((f) => f.kind));
      assert.equal(kinds.size, faults.length, `seed ${seed}: a kind twice before all once`);
    }
    for (const [i, f] of faults.entries()) {
      assert.ok(f.at >= 1_000 && f.at <= 145_000, `seed ${seed}: fault at ${f.at}`);
      if (i > 0) assert.ok(f.at >= faults[i - 1]!.at + 1_000);
      if (f.kind === "pause") {
        assert.ok(f.durationMs >= PAUSE_MIN_MS && f.durationMs <= PAUSE_MAX_MS);
      }
      if (f.kind === "partition") {
        assert.ok(f.durationMs >= PARTITION_MIN_MS && f.durationMs <= PARTITION_MAX_MS);
      }
      if (f.kind === "slow-apiserver") {
        assert.ok(f.delayMs! >= SLOW_MIN_DELAY_MS && f.delayMs! <= SLOW_MAX_DELAY_MS);
      }
      if (f.kind === "pause-in-publish") {
        assert.ok(f.durationMs >= IN_PUBLISH_PAUSE_MIN_MS, "paused past the 6 s lease");
        assert.ok(f.delayMs! > 0);
      }
      if (f.kind === "driver-fail") assert.ok(DRIVER_FAIL_CODES.includes(f.code!));
      if (REPLICA_KINDS.has(f.kind)) {
        assert.ok(f.target === "leader" || (f.target! >= 0 && f.target! < 3));
      } else assert.equal(f.target, undefined);
    }
  }
});

Deno.test("drawSchedule() gives CI's run (seed 1, 2.5 minutes) every kind", () => {
  const counts = countKinds(drawSchedule(1, { phaseMs: 150_000, replicas: 3 }));
  for (const kind of FAULT_KINDS) assert.ok(counts[kind] >= 1, `no ${kind}`);
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
  assert.equal(
    describeFault({ at: 3_000, kind: "slow-apiserver", durationMs: 9_000, delayMs: 1_500 }),
    "+3.0 s slow-apiserver 9.0 s, answers 1.5 s late",
  );
  assert.equal(
    describeFault({ at: 4_000, kind: "driver-fail", durationMs: 2_000, code: "Aborted" }),
    "+4.0 s driver-fail 2.0 s with Aborted",
  );
});
