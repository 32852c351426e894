/**
 * `/metrics` of `main.ts` run as a child process (dummy mode, against the in-memory API server):
 * the process metrics a Go sidecar's dashboards and memory alerts read (client_golang's
 * `process_*`) and the JavaScript heap gauges that replace `go_memstats_*`, each present with
 * its type and a plausible value.
 */

import assert from "node:assert/strict";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { spawnMain } from "../../testkit/harness/main_process.ts";

/** Resolves when `pred()` holds, checked every 20 ms; rejects after `ms`. */
async function until(what: string, pred: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The value of the unlabelled sample `name`, and its family's TYPE. */
function sample(text: string, name: string): { value: number; type: string | undefined } {
  const lines = text.split("\n");
  const line = lines.find((l) => l.startsWith(`${name} `));
  assert.ok(line !== undefined, `${name} is served`);
  const type = lines.find((l) => l.startsWith(`# TYPE ${name} `))?.split(" ")[3];
  return { value: Number(line.slice(name.length + 1)), type };
}

Deno.test({
  name:
    "main.ts serves client_golang's process metrics and the JS heap gauges with plausible values",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await using server = await MemoryApiServer.start();
    const dir = await Deno.makeTempDir({ prefix: "attacher-process-metrics-" });
    const kubeconfig = `${dir}/kubeconfig`;
    await Deno.writeTextFile(kubeconfig, server.kubeconfig());
    const startedAt = Date.now() / 1000;
    const run = spawnMain([
      "--dummy",
      `--kubeconfig=${kubeconfig}`,
      "--http-endpoint=127.0.0.1:0",
    ]);
    try {
      await until("the HTTP server", () => /"Serving HTTP".*port=\d+/.test(run.log));
      const port = run.log.match(/"Serving HTTP".*port=(\d+)/)![1];
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

      const cpu = sample(text, "process_cpu_seconds_total");
      assert.equal(cpu.type, "counter");
      assert.ok(cpu.value > 0 && cpu.value < 600, `cpu ${cpu.value}`);
      const rss = sample(text, "process_resident_memory_bytes");
      const vsize = sample(text, "process_virtual_memory_bytes");
      assert.ok(rss.value > 10 * 2 ** 20 && rss.value < 4 * 2 ** 30, `rss ${rss.value}`);
      assert.ok(vsize.value > rss.value, `vsize ${vsize.value}`);
      const open = sample(text, "process_open_fds");
      const max = sample(text, "process_max_fds");
      assert.ok(open.value >= 3 && open.value < max.value, `fds ${open.value} of ${max.value}`);
      const start = sample(text, "process_start_time_seconds");
      assert.ok(
        start.value > startedAt - 5 && start.value < Date.now() / 1000,
        `start ${start.value}`,
      );
      for (const name of ["process_resident_memory_bytes", "process_open_fds"]) {
        assert.equal(sample(text, name).type, "gauge", name);
      }
      const used = sample(text, "deno_heap_used_bytes");
      const total = sample(text, "deno_heap_total_bytes");
      const external = sample(text, "deno_heap_external_bytes");
      assert.ok(used.value > 2 ** 20 && used.value <= total.value, `heap ${used.value}`);
      assert.ok(total.value < rss.value, "the heap is part of the resident memory");
      assert.ok(external.value >= 0);
      assert.equal(used.type, "gauge");
      assert.match(text, /^# HELP process_open_fds Number of open file descriptors\.$/m);

      run.child.kill("SIGTERM");
      assert.equal((await run.child.status).code, 0, run.log);
    } finally {
      try {
        run.child.kill("SIGKILL");
      } catch {
        // already exited
      }
      await run.child.status;
      await run.drained;
      await Deno.remove(dir, { recursive: true });
    }
  },
});
