import assert from "node:assert/strict";
import { compileSteps, compileTask, runtimeFlags } from "./shipped_form.ts";

Deno.test("runtimeFlags() keeps a task's permissions and V8 flags only", () => {
  assert.deepEqual(
    runtimeFlags(
      "deno compile --frozen --allow-net --allow-read --v8-flags=--max-semi-space-size=1 " +
        "--output dist/csi-attacher main.ts",
    ),
    ["--allow-net", "--allow-read", "--v8-flags=--max-semi-space-size=1"],
  );
});

Deno.test("compileSteps() splits the compile task into the release bundle and its compile", async () => {
  const steps = compileSteps(await compileTask(new URL("../", import.meta.url).pathname));
  assert.equal(steps.bundle[0], "bundle");
  assert.ok(steps.bundle.includes("--minify") && steps.bundle.includes("--keep-names"));
  const outdir = steps.bundle[steps.bundle.indexOf("--outdir") + 1];
  assert.equal(steps.compile[0], "compile");
  assert.equal(steps.compile.at(-1), `${outdir}/main.js`, "the binary is built from the bundle");
  assert.ok(runtimeFlags(steps.compile.join(" ")).some((f) => f.startsWith("--v8-flags=")));
  assert.throws(() => compileSteps("deno compile --output x main.ts"), /deno bundle/);
});
