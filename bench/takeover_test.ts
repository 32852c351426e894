import assert from "node:assert/strict";
import { listsSentAt, replicaCommand, setUpTimeoutMs, workEnd } from "./takeover.ts";

Deno.test("workEnd() is the last busy sample once a quiet window followed", () => {
  // [ms, CPU s]: busy (a full core) from 1000 to 2000, then idle.
  const samples: [number, number][] = [
    [0, 0],
    [500, 0.001],
    [1000, 0.002],
    [1500, 0.5],
    [2000, 1.0],
    [2500, 1.01],
    [3000, 1.02],
    [4000, 1.03],
    [4500, 1.031],
    [5000, 1.032],
  ];
  assert.equal(workEnd(samples, 0), 2000);
  // Not yet: only 2.5 s quiet after the busy sample.
  assert.equal(workEnd(samples.slice(0, 9), 0), undefined);
  // Work before `from` does not count: quiet from 2000 on.
  assert.equal(workEnd(samples, 2000, 2000, 0.1, 2000), 2000);
  assert.equal(workEnd(samples, 2000, 2000, 0.1, 3000), 2000);
});

Deno.test("workEnd() does not end the work in a quiet wait before `quietFrom`", () => {
  // Idle for 4 s (waiting on a list), busy from 4 to 5 s, then idle.
  const samples: [number, number][] = [[0, 0]];
  for (let t = 500; t <= 9000; t += 500) {
    const cpu = t <= 4000 ? 0 : t <= 5000 ? (t - 4000) / 1000 : 1;
    samples.push([t, cpu]);
  }
  assert.equal(workEnd(samples, 0), 0, "without quietFrom the wait looks like the end");
  assert.equal(workEnd(samples, 0, 4000), 5000);
});

/** `unshare --uts` needs CAP_SYS_ADMIN (root in the benchmark's machine). */
function canUnshare(): boolean {
  try {
    return new Deno.Command("unshare", { args: ["--uts", "true"], stderr: "null" }).outputSync()
      .success;
  } catch {
    return false;
  }
}

Deno.test({
  name: "replicaCommand() gives the replica its own host name for both attachers",
  ignore: !canUnshare(),
}, async () => {
  const cmd = replicaCommand("sh -c 'echo $HOSTNAME $(hostname)' sh", "replica-x");
  const out = await new Deno.Command("sh", { args: ["-c", `exec ${cmd}`], stdout: "piped" })
    .output();
  assert.ok(out.success);
  assert.equal(new TextDecoder().decode(out.stdout).trim(), "replica-x replica-x");
});

Deno.test("listsSentAt() is the later of the VA and PV lists sent from `fromMs` on", () => {
  const sent = [
    { resource: "volumeattachments", at: 100 }, // the old leader's
    { resource: "persistentvolumes", at: 120 },
    { resource: "csinodes", at: 1500 },
    { resource: "persistentvolumes", at: 1400 },
    { resource: "volumeattachments", at: 1700 },
    { resource: "volumeattachments", at: 9000 }, // a later relist
  ];
  assert.equal(listsSentAt(sent, 1000), 1700);
  assert.ok(Number.isNaN(listsSentAt(sent.slice(0, 4), 1000)), "no VA list after 1000");
});

Deno.test("setUpTimeoutMs() gives the leader's first attach of N at least 20 ms per VA", () => {
  assert.equal(setUpTimeoutMs(5000, 120_000), 120_000);
  assert.equal(setUpTimeoutMs(20_000, 120_000), 400_000);
});
