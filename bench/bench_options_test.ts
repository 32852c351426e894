import assert from "node:assert/strict";
import { BenchUsageError, parseBenchOptions } from "./bench_options.ts";
import { attachersFor, scenariosFor, shortName } from "./main.ts";

Deno.test("parseBenchOptions() defaults: fake sizes 100,1000, one run, ten workers", () => {
  const o = parseBenchOptions(["--fake"], "/out");
  assert.deepEqual(o.sizes, [100, 1000]);
  assert.equal(o.runs, 1);
  assert.equal(o.workers, 10);
  assert.equal(o.outDir, "/out");
  assert.deepEqual(parseBenchOptions([], "/out").sizes, [100, 1000, 5000]);
  assert.equal(parseBenchOptions(["--", "--fake"], "/out").fake, true);
});

Deno.test("parseBenchOptions() takes two to six attachers and then runs each three times", () => {
  const o = parseBenchOptions(["--attacher-cmd", "a --x", "--attacher-cmd=b"], "/out");
  assert.deepEqual(o.attacherCommands, ["a --x", "b"]);
  assert.equal(o.runs, 3);
  const six = ["a", "b", "c", "d", "e", "f"].map((c) => `--attacher-cmd=${c}`);
  assert.equal(parseBenchOptions(six, "/o").attacherCommands.length, 6);
  assert.equal(parseBenchOptions(six, "/o").runs, 3);
  assert.throws(() => parseBenchOptions([...six, "--attacher-cmd=g"], "/o"), BenchUsageError);
  assert.throws(() => parseBenchOptions(["--sizes=10,x"], "/o"), BenchUsageError);
  assert.throws(() => parseBenchOptions(["--bogus"], "/o"), BenchUsageError);
});

Deno.test("scenariosFor() throttles only N ≤ 100 and orders throttled first", () => {
  const names = scenariosFor(parseBenchOptions(["--fake", "--sizes=1000,20,100"], "/o"))
    .map((s) => `${s.name}/${s.qps}/${s.burst}`);
  assert.deepEqual(names, [
    "N=20, qps 5, burst 10/5/10",
    "N=100, qps 5, burst 10/5/10",
    "N=20, unthrottled/10000/10000",
    "N=100, unthrottled/10000/10000",
    "N=1000, unthrottled/10000/10000",
  ]);
  const skip = parseBenchOptions(["--fake", "--skip-throttled"], "/o");
  assert.ok(scenariosFor(skip).every((s) => s.qps === 10000));
});

Deno.test("attachersFor() labels the commands A and B by program name", () => {
  assert.equal(shortName("/usr/bin/deno run -A /repo/main.ts"), "main.ts");
  assert.equal(shortName("GOGC=200 /root/.cache/bin/csi-attacher --timeout=15s"), "csi-attacher");
  assert.equal(
    shortName("env KUBE_FEATURE_WatchListClient=false nice -n 5 /b/csi-attacher"),
    "csi-attacher",
  );
  const o = parseBenchOptions(["--attacher-cmd=/x/csi-attacher"], "/o");
  assert.deepEqual(attachersFor(o, "deno run main.ts").map((a) => a.label), ["A: csi-attacher"]);
  assert.deepEqual(
    attachersFor(parseBenchOptions([], "/o"), "deno run main.ts").map((a) => a.label),
    ["A: main.ts"],
  );
});

Deno.test("parseBenchOptions() --detach-flood: N=1000 by default, only with --fake", () => {
  const o = parseBenchOptions(["--fake", "--detach-flood"], "/o");
  assert.equal(o.detachFlood, true);
  assert.deepEqual(o.sizes, [1000]);
  assert.throws(() => parseBenchOptions(["--detach-flood"], "/o"), BenchUsageError);
  const scenarios = scenariosFor(o);
  assert.deepEqual(scenarios.map((s) => [s.name, s.unpublishDelayMs, s.qps]), [
    ["N=1000, detach flood (unpublish 100 ms)", 100, 10000],
  ]);
  assert.ok(
    scenariosFor(parseBenchOptions(["--fake"], "/o")).every((s) =>
      s.unpublishDelayMs === undefined
    ),
  );
});

Deno.test("parseBenchOptions() --pods: cluster only, N=100 over 5 nodes, unthrottled scenarios", () => {
  const o = parseBenchOptions(["--pods"], "/o");
  assert.equal(o.pods, true);
  assert.deepEqual(o.sizes, [100]);
  assert.equal(o.nodes, 5);
  assert.equal(parseBenchOptions(["--pods", "--nodes=3"], "/o").nodes, 3);
  assert.equal(parseBenchOptions([], "/o").nodes, 50);
  assert.equal(parseBenchOptions([], "/o").pods, false);
  assert.throws(() => parseBenchOptions(["--pods", "--fake"], "/o"), /--pods with --fake/);
  assert.throws(
    () => parseBenchOptions(["--pods", "--fake", "--detach-flood"], "/o"),
    BenchUsageError,
  );
  const scenarios = scenariosFor(parseBenchOptions(["--pods", "--sizes=50,20"], "/o"));
  assert.deepEqual(scenarios.map((s) => [s.name, s.count, s.nodes, s.qps, s.pods]), [
    ["N=20, Pods through kube-controller-manager, unthrottled", 20, 5, 10000, true],
    ["N=50, Pods through kube-controller-manager, unthrottled", 50, 5, 10000, true],
  ]);
});
