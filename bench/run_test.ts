import assert from "node:assert/strict";
import { FakeEnvironment } from "./fake_environment.ts";
import { ProcReader } from "./proc_stats.ts";
import { defaultPhaseTimeoutMs, runOnce, type Scenario } from "./run.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const DRIVER = "example.csi.k8s.io";

const scenario: Scenario = {
  name: "N=4, unthrottled",
  count: 4,
  nodes: 2,
  qps: 10_000,
  burst: 10_000,
  workers: 2,
};

async function withLogDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "bench-run-test-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("runOnce() measures main.ts attaching and detaching through the fakes", async () => {
  const proc = await ProcReader.create();
  const result = await withLogDir((logDir) =>
    runOnce(
      {
        environment: (p) => FakeEnvironment.start({ ...p, driver: DRIVER }),
        proc,
        progress: () => {},
      },
      scenario,
      { label: "A: main.ts", commandLine: `${Deno.execPath()} run --allow-all ${MAIN}` },
      { run: 1, quietMs: 300, quietMaxMs: 5000, restMs: 200, logDir, prefix: "t-" },
    )
  );
  assert.equal(result.ok, true, result.error ?? "");
  assert.ok(result.startupSeconds > 0);
  assert.ok(result.attachSeconds > 0 && result.detachSeconds > 0);
  // Of 4, the 1st to the 4th attach: 3 attaches within the whole phase.
  assert.equal(result.timeline?.attachPace.attaches, 3);
  assert.ok(result.steadyAttachesPerSecond > 0, String(result.steadyAttachesPerSecond));
  assert.equal(result.attachLatency.count, 4);
  assert.equal(result.detachLatency.count, 4);
  const { attach, detach } = result.phases;
  assert.ok(attach !== undefined && detach !== undefined);
  // Every fresh attach writes the PV finalizer, the VA metadata and the VA status.
  assert.equal(attach.requests.byKey["patch persistentvolumes"], 4);
  assert.equal(attach.requests.byKey["patch volumeattachments"], 4);
  assert.ok((attach.requests.byKey["patch volumeattachments/status"] ?? 0) >= 4);
  assert.ok((attach.csiCalls.ControllerPublishVolume ?? 0) >= 4);
  assert.equal(detach.csiCalls.ControllerUnpublishVolume, 4);
  assert.equal(detach.requests.byKey["patch volumeattachments"], 4);
  // The canary was attached while starting: a publish and a watch list.
  assert.ok((result.phases.startup?.csiCalls.ControllerPublishVolume ?? 0) >= 1);
  assert.ok((result.phases.startup?.requests.byKey["watch volumeattachments"] ?? 0) >= 1);
  assert.ok(result.cpuSecondsTotal > 0);
  assert.ok(result.peakRssBytes >= result.restRssBytes && result.restRssBytes > 0);
});

Deno.test("runOnce() reports an attacher that exits instead of waiting for the timeout", async () => {
  const proc = await ProcReader.create();
  const started = Date.now();
  const result = await withLogDir((logDir) =>
    runOnce(
      {
        environment: (p) => FakeEnvironment.start({ ...p, driver: DRIVER }),
        proc,
        progress: () => {},
      },
      scenario,
      { label: "A: sh", commandLine: "sh -c 'echo no such attacher; exit 3'" },
      { run: 1, quietMs: 300, quietMaxMs: 5000, restMs: 200, logDir, prefix: "t-" },
    )
  );
  assert.equal(result.ok, false);
  assert.match(result.error ?? "", /exited with status 3 waiting for canary/);
  assert.match(result.error ?? "", /no such attacher/);
  assert.ok(Date.now() - started < 30_000);
  assert.ok(Number.isNaN(result.attachSeconds));
});

Deno.test("runOnce() in the detach flood times a new attach made while unpublishes are slow", async () => {
  const proc = await ProcReader.create();
  const flood: Scenario = { ...scenario, name: "N=4, detach flood", unpublishDelayMs: 100 };
  const result = await withLogDir((logDir) =>
    runOnce(
      {
        environment: (p) => FakeEnvironment.start({ ...p, driver: DRIVER }),
        proc,
        progress: () => {},
      },
      flood,
      { label: "A: main.ts", commandLine: `${Deno.execPath()} run --allow-all ${MAIN}` },
      { run: 1, quietMs: 300, quietMaxMs: 5000, restMs: 200, logDir, prefix: "f-" },
    )
  );
  assert.equal(result.ok, true, result.error ?? "");
  assert.ok(result.floodAttachLatencySeconds > 0, String(result.floodAttachLatencySeconds));
  assert.ok(Number.isFinite(result.timeline?.floodAttachedAt));
  // Two detach workers, four unpublishes of 100 ms each: the detaches take at least 0.2 s.
  assert.ok(result.detachSeconds >= 0.2, String(result.detachSeconds));
  assert.equal(result.phases.detach?.csiCalls.ControllerUnpublishVolume, 4);
  assert.equal(result.phases.detach?.csiCalls.ControllerPublishVolume, 1, "the probe's attach");
});

Deno.test("defaultPhaseTimeoutMs lets N=20 000 go at the cluster's slow pace of 115 a second", () => {
  const large: Scenario = { ...scenario, name: "N=20000, unthrottled", count: 20_000 };
  // The pace kube-apiserver allowed both attachers on a slow day: 20 000 at 115 a second.
  assert.ok(defaultPhaseTimeoutMs(large) > (20_000 / 115) * 1000);
  assert.equal(defaultPhaseTimeoutMs(scenario), 120_000, "small N: the 120 s floor");
});
