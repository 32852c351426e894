import assert from "node:assert/strict";
import { niceTicks, panelsOf, renderPicture } from "./picture.ts";
import type { RunResult } from "./run.ts";
import { summarize } from "./stats.ts";

function run(attacher: string, n: number, ok = true): RunResult {
  const t0 = 1_000_000;
  return {
    attacher,
    scenario: "N=2",
    run: n,
    ok,
    ...(ok ? {} : { error: "timed out after 120 s waiting for attached (1)\n--- log ---" }),
    startupSeconds: 1,
    attachSeconds: 2,
    attachesPerSecond: 1000,
    steadyAttachesPerSecond: 1200,
    detachSeconds: 2,
    detachesPerSecond: 1500,
    attachLatency: summarize([]),
    detachLatency: summarize([]),
    floodAttachLatencySeconds: NaN,
    phases: {},
    cpuSecondsTotal: 1,
    peakRssBytes: 200 * 2 ** 20,
    restRssBytes: 100 * 2 ** 20,
    startupRssBytes: 50 * 2 ** 20,
    rssSeries: { at: [t0 + 500, t0 + 9000], bytes: [50 * 2 ** 20, 180 * 2 ** 20] },
    phaseTimes: {
      startup: [t0, t0 + 1000],
      attach: [t0 + 1000, t0 + 3000],
      rest: [t0 + 3000, t0 + 6000],
      detach: [t0 + 6000, t0 + 9000],
    },
    timeline: {
      attachedSeries: { startAt: t0 + 1000, stepMs: 1000, counts: [0, 1, 2, 2] },
    } as RunResult["timeline"],
  };
}

Deno.test("niceTicks() covers the maximum in steps of 1, 2 or 5 × 10^k", () => {
  assert.deepEqual(niceTicks(480, 4), [0, 200, 400, 600]);
  assert.deepEqual(niceTicks(100_000, 4), [0, 50_000, 100_000]);
  assert.deepEqual(niceTicks(0), [0, 1]);
});

Deno.test("the picture has a panel per run in run order, with both series and the phases", () => {
  const labels = ["A: main.js", "B: csi-attacher"];
  const panels = panelsOf(labels, [[run("A", 1), run("A", 2)], [run("B", 1, false)]]);
  assert.deepEqual(panels.map((p) => p.title.split(":").slice(0, 2).join(":")), [
    "A: main.js, run 1",
    "B: csi-attacher, run 1",
    "A: main.js, run 2",
  ]);
  assert.match(panels[0]!.title, /peak 200 MiB, at rest 100 MiB; 1000 attaches\/s/);
  assert.match(panels[1]!.title, /FAILED \(timed out after 120 s waiting for attached \(1\)\)$/);
  const svg = renderPicture("N=2 <fake>", 2, panels, labels);
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.ok(!svg.includes("<script"));
  assert.match(svg, /N=2 &lt;fake&gt;/);
  assert.equal(svg.match(/<polyline/g)?.length, 6, "RSS and attached in each of 3 panels");
  // The RSS axis reaches past the largest sample (180 MiB); the time axis to 9 s.
  assert.match(svg, />200<\/text>/);
  assert.match(svg, />9<\/text>/);
  for (const phase of ["startup", "attach", "rest", "detach"]) assert.ok(svg.includes(phase));
  // A's first RSS point: 0.5 s of 9 s across the 824 px of the plot, from x = 64.
  assert.match(svg, /points="109.8,/);
});
