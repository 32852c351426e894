import assert from "node:assert/strict";
import {
  parseContextSwitches,
  parseStat,
  parseStatusMemory,
  processGone,
  ProcReader,
} from "./proc_stats.ts";

Deno.test("parseStat() counts fields from the last parenthesis", () => {
  const line = "4242 (deno (worker) x) S 17 4242 17 0 -1 4194560 1 0 0 0 250 31 7 3 20 0 9 0";
  assert.deepEqual(parseStat(line), { ppid: 17, utime: 250, stime: 31, cutime: 7, cstime: 3 });
  assert.throws(() => parseStat("garbage"), SyntaxError);
});

Deno.test("parseStatusMemory() reads VmRSS and VmHWM in bytes", () => {
  const text = "Name:\tdeno\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
  assert.deepEqual(parseStatusMemory(text), {
    rssBytes: 102400 * 1024,
    peakRssBytes: 204800 * 1024,
  });
  assert.deepEqual(parseStatusMemory("Name:\tzombie\n"), { rssBytes: 0, peakRssBytes: 0 });
});

Deno.test("ProcReader.sampleTree() sums a child process into its parent's tree", async () => {
  const reader = await ProcReader.create();
  const self = reader.sample(Deno.pid);
  assert.ok(self !== undefined && self.rssBytes > 0 && self.peakRssBytes >= self.rssBytes);
  const child = new Deno.Command("sleep", { args: ["5"], stdout: "null", stderr: "null" }).spawn();
  try {
    // Until the child has exec'd, its memory is the parent's; wait for `sleep` itself.
    while ((await Deno.readTextFile(`/proc/${child.pid}/comm`)).trim() !== "sleep") {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const tree = reader.sampleTree(Deno.pid);
    const own = reader.sample(child.pid);
    assert.ok(tree !== undefined && own !== undefined && own.rssBytes > 0);
    assert.ok(tree.pids.includes(child.pid), `${tree.pids} lacks ${child.pid}`);
    // The tree holds the parent as well: more than the child alone.
    assert.ok(tree.rssBytes > own.rssBytes, `${tree.rssBytes} <= ${own.rssBytes}`);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
  assert.equal(reader.sample(2 ** 22 + 12345), undefined);
});

Deno.test("processGone() takes a process that exited between the open and the read as gone", () => {
  // What reading /proc/<pid>/stat of an exiting process threw in a benchmark run.
  assert.equal(processGone(new Error("No such process (os error 3)")), true);
  assert.equal(processGone(new Deno.errors.NotFound("readfile '/proc/1/stat'")), true);
  assert.equal(processGone(new Deno.errors.PermissionDenied("/proc/1/status")), false);
  assert.equal(processGone(new Error("Input/output error (os error 5)")), false);
  assert.equal(processGone("gone"), false);
});

Deno.test("parseContextSwitches() reads a thread's voluntary and involuntary switches", () => {
  const text = "Name:\tdeno\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";
  assert.deepEqual(parseContextSwitches(text), { voluntary: 1234, involuntary: 56 });
  assert.deepEqual(parseContextSwitches("Name:\tzombie\n"), { voluntary: 0, involuntary: 0 });
});

Deno.test("ProcReader.contextSwitches() counts every thread, so a sleeping child's wake-ups", async () => {
  const reader = await ProcReader.create();
  // A shell that wakes from a sleep 20 times, then waits.
  const child = new Deno.Command("sh", {
    args: ["-c", "for i in $(seq 20); do sleep 0.01; done; exec sleep 5"],
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    while ((await Deno.readTextFile(`/proc/${child.pid}/comm`)).trim() !== "sleep") {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Each `sleep` it forked and waited for woke the shell at least once.
    const switches = reader.contextSwitches([child.pid]);
    assert.ok(switches.voluntary >= 20, `${switches.voluntary} < 20`);
    const mine = reader.contextSwitches([Deno.pid]);
    const main = parseContextSwitches(await Deno.readTextFile(`/proc/${Deno.pid}/status`));
    // This process has more threads than its main one, each with its own counters.
    assert.ok(mine.voluntary > main.voluntary, `${mine.voluntary} <= ${main.voluntary}`);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
  assert.deepEqual(reader.contextSwitches([2 ** 22 + 12345]), { voluntary: 0, involuntary: 0 });
});
