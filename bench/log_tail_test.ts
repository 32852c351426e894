import assert from "node:assert/strict";
import { LogTail } from "./log_tail.ts";

Deno.test("LogTail.take() returns only complete new lines", async () => {
  const dir = await Deno.makeTempDir({ prefix: "log-tail-test-" });
  try {
    const path = `${dir}/x.log`;
    const tail = new LogTail({ path });
    assert.deepEqual(await tail.take(), []); // no file yet
    await Deno.writeTextFile(path, "old 1\nold 2\n");
    await tail.skip();
    await Deno.writeTextFile(path, "new 1\nnew 2\npart", { append: true });
    assert.deepEqual(await tail.take(), ["new 1", "new 2"]);
    assert.deepEqual(await tail.take(), []);
    await Deno.writeTextFile(path, "ial\n", { append: true });
    assert.deepEqual(await tail.take(), ["partial"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
