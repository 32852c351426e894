import assert from "node:assert/strict";
import { parseClusterArgs } from "./main.ts";

Deno.test("parseClusterArgs() reads seed, minutes and attacher, in both spellings", () => {
  assert.deepEqual(parseClusterArgs(["--", "--cluster"]), {
    seed: 1,
    minutes: 2.5,
    attacher: "ours",
    keep: false,
  });
  assert.deepEqual(
    parseClusterArgs(["--cluster", "--seed", "7", "--minutes=10", "--attacher", "go", "--keep"]),
    { seed: 7, minutes: 10, attacher: "go", keep: true },
  );
});

Deno.test("parseClusterArgs() refuses what it cannot run", () => {
  assert.throws(() => parseClusterArgs(["--minutes", "0.1"]), /Invalid --minutes/);
  assert.throws(() => parseClusterArgs(["--seed", "-1"]), /Invalid --seed/);
  assert.throws(() => parseClusterArgs(["--attacher", "rust"]), /Invalid --attacher/);
  assert.throws(() => parseClusterArgs(["--schedules", "5"]), /Unknown flag: --schedules/);
});
