import assert from "node:assert/strict";
import { figureRows, perObjectRows } from "./report.ts";
import type { PhaseFigures, RunResult, Scenario } from "./run.ts";
import { summarize } from "./stats.ts";

const base: Scenario = { name: "N=2", count: 2, nodes: 1, qps: 1, burst: 1, workers: 1 };

function run(attacher: string, podSeconds: number[] | undefined, ok = true): RunResult {
  const latency = summarize([]);
  return {
    attacher,
    scenario: base.name,
    run: 1,
    ok,
    startupSeconds: 1,
    attachSeconds: 2,
    attachesPerSecond: 1,
    steadyAttachesPerSecond: 1,
    detachSeconds: 2,
    detachesPerSecond: 1,
    attachLatency: latency,
    detachLatency: latency,
    floodAttachLatencySeconds: NaN,
    phases: {},
    cpuSecondsTotal: 1,
    peakRssBytes: 0,
    restRssBytes: 0,
    startupRssBytes: 0,
    rssSeries: { at: [], bytes: [] },
    phaseTimes: {},
    ...(podSeconds === undefined ? {} : {
      pods: {
        attachLatency: summarize(podSeconds),
        allAttachedSeconds: Math.max(...podSeconds) + 0.5,
        detachLatency: summarize(podSeconds.map((s) => s * 2)),
        allDetachedSeconds: Math.max(...podSeconds) * 2 + 0.5,
      },
    }),
  };
}

function values(rows: ReturnType<typeof figureRows>, figure: string): number[] | undefined {
  return rows.find((r) => r.figure === figure)?.values;
}

Deno.test("figureRows() adds the Pod rows for --pods scenarios: medians per attacher", () => {
  const rows = figureRows({ ...base, pods: true }, [
    [run("A", [1, 3]), run("A", [2, 4]), run("A", [100, 100], false)],
    [run("B", [5, 7])],
  ]);
  assert.deepEqual(values(rows, "Pod → volumesAttached p50 (s)"), [1.5, 5]);
  assert.deepEqual(values(rows, "Pod → volumesAttached p99 (s)"), [3.5, 7]);
  assert.deepEqual(values(rows, "all Pods' volumes attached (s)"), [4, 7.5]);
  assert.deepEqual(values(rows, "Pod deleted → off volumesAttached p50 (s)"), [3, 10]);
  assert.deepEqual(values(rows, "Pod deleted → off volumesAttached p99 (s)"), [7, 14]);
  assert.deepEqual(values(rows, "all off volumesAttached (s)"), [7.5, 14.5]);
  // They come before the VolumeAttachment figures, which stay.
  const figures = rows.map((r) => r.figure);
  assert.ok(
    figures.indexOf("all off volumesAttached (s)") < figures.indexOf("all attached (s)"),
  );
});

Deno.test("figureRows() has no Pod rows for VolumeAttachment scenarios", () => {
  const rows = figureRows(base, [[run("A", undefined)]]);
  assert.equal(rows.some((r) => r.figure.startsWith("Pod")), false);
  assert.deepEqual(values(rows, "all attached (s)"), [2]);
});

Deno.test("perObjectRows: the RSS slope between the two largest unthrottled sizes", () => {
  const MIB = 1024 * 1024;
  const scenario = (count: number, qps = 10_000): Scenario => ({
    ...base,
    name: `N=${count}`,
    count,
    qps,
  });
  const sized = (a: number, b: number) => ({
    ...run("A", undefined),
    restRssBytes: a * MIB,
    startupRssBytes: b * MIB,
    peakRssBytes: a * 2 * MIB,
  });
  const rows = perObjectRows([
    { scenario: scenario(100, 5), runs: [[sized(1, 1)], [sized(1, 1)]] },
    { scenario: scenario(100), runs: [[sized(60, 50)], [sized(60, 55)]] },
    // Medians of three: 90 and 100 MiB at rest for A, 120 for B.
    {
      scenario: scenario(5000),
      runs: [[sized(90, 70), sized(91, 70), { ...sized(500, 500), ok: false }], [
        sized(120, 80),
      ]],
    },
    { scenario: scenario(20_000), runs: [[sized(120, 100)], [sized(240, 125)]] },
  ], 10_000);
  assert.deepEqual(rows.map((r) => r.figure), [
    "RSS at rest per VA + PV pair (KiB), N=5000 → 20000",
    "RSS after start per PV (KiB), N=5000 → 20000",
    "peak RSS per VA + PV pair (KiB), N=5000 → 20000",
  ]);
  const kib = (mib: number) => (mib * 1024) / 15_000;
  assert.deepEqual(rows[0]?.values, [kib(120 - 90.5), kib(120)]);
  assert.deepEqual(rows[1]?.values, [kib(30), kib(45)]);
  assert.deepEqual(rows[2]?.values, [kib(240 - 181), kib(240)]);
  assert.deepEqual(perObjectRows([{ scenario: scenario(100), runs: [[sized(1, 1)]] }], 10_000), []);
});

Deno.test("figureRows(): kube-apiserver + etcd CPU per attach and per detach, etcd optional", () => {
  const phase = (apiServer: number, etcd?: number): PhaseFigures => ({
    requests: { byKey: {}, contentTypes: {}, accept: {}, userAgents: {}, responseTypes: {} },
    csiCalls: {},
    cpuSeconds: 1,
    helperCpuSeconds: etcd === undefined ? { apiServer } : { apiServer, etcd },
  });
  const cluster = {
    ...run("A", undefined),
    phases: { attach: phase(0.3, 0.1), detach: phase(0.2, 0.05) },
  };
  const fake = { ...run("B", undefined), phases: { attach: phase(0.5), detach: phase(0.1) } };
  const rows = figureRows(base, [[cluster], [fake]]);
  // N=2: (0.3 + 0.1) s / 2 = 200 ms per attach; the fake has no etcd.
  assert.deepEqual(values(rows, "API server + etcd CPU ms / attach"), [200, 250]);
  assert.deepEqual(values(rows, "API server + etcd CPU ms / detach"), [125, 50]);
});

Deno.test("figureRows(): wake-ups and preemptions per attach and detach, absent in old results", () => {
  const phase = (voluntary: number, involuntary: number): PhaseFigures => ({
    requests: { byKey: {}, contentTypes: {}, accept: {}, userAgents: {}, responseTypes: {} },
    csiCalls: {},
    cpuSeconds: 1,
    helperCpuSeconds: {},
    switches: { voluntary, involuntary },
  });
  const counted = {
    ...run("A", undefined),
    phases: { attach: phase(30, 4), detach: phase(10, 2) },
  };
  const old = {
    ...run("B", undefined),
    phases: { attach: { ...phase(0, 0), switches: undefined } },
  };
  const rows = figureRows(base, [[counted], [old]]);
  // N=2.
  assert.deepEqual(values(rows, "wake-ups / attach"), [15, NaN]);
  assert.deepEqual(values(rows, "wake-ups / detach"), [5, NaN]);
  assert.deepEqual(values(rows, "preemptions / attach"), [2, NaN]);
});
