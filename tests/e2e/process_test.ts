import assert from "node:assert/strict";
import { groupAlive, ManagedProcess } from "./process.ts";

/** The file's text, or "" while it does not exist yet (the shell creates it). */
function readIfExists(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return "";
    throw err;
  }
}

async function until(pred: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (pred()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return pred();
}

Deno.test("ManagedProcess: output goes to the log file, stop() ends the whole group", async () => {
  const dir = await Deno.makeTempDir({ prefix: "e2e-process-" });
  try {
    const p = ManagedProcess.start({
      name: "shell",
      cmd: "sh",
      args: ["-c", "echo started; sleep 30 & sleep 30"],
      logFile: `${dir}/log`,
    });
    assert.ok(await until(() => readIfExists(`${dir}/log`).includes("started"), 5000));
    const status = await p.stop(2000);
    assert.equal(status.signal, "SIGTERM");
    assert.equal(groupAlive(p.pid), false, "the background sleep went too");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ManagedProcess: the group is killed once its owner process is gone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "e2e-process-" });
  const owner = new Deno.Command("sleep", { args: ["0.3"] }).spawn();
  try {
    const p = ManagedProcess.start({
      name: "orphan",
      cmd: "sleep",
      args: ["30"],
      logFile: `${dir}/log`,
      ownerPid: owner.pid,
    });
    await owner.status;
    const status = await p.status;
    assert.equal(status.signal, "SIGKILL");
    assert.ok(await until(() => !groupAlive(p.pid), 3000), "the watchdog is gone too");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
