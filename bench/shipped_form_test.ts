import assert from "node:assert/strict";
import { compileSteps, compileTask, imageEnvironment, runtimeFlags } from "./shipped_form.ts";

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
  assert.equal(steps.stamp.at(-2), "deploy/build/stamp_version.ts");
  assert.equal(steps.stamp.at(-1), outdir, "the version is stamped into the release bundle");
  assert.equal(steps.compile[0], "compile");
  assert.equal(steps.compile.at(-1), `${outdir}/main.js`, "the binary is built from the bundle");
  assert.ok(runtimeFlags(steps.compile.join(" ")).some((f) => f.startsWith("--v8-flags=")));
  assert.throws(() => compileSteps("deno compile --output x main.ts"), /deno bundle/);
});

Deno.test("imageEnvironment() reads the ENV lines of the Containerfile's last stage", async () => {
  assert.deepEqual(
    imageEnvironment(
      "FROM a AS build\nENV BUILD_ONLY=1\nRUN x\n\nFROM b\nCOPY x /x\nENV A=1 B=2\n" +
        "env C=/x:y\nUSER 1\n",
    ),
    [["A", "1"], ["B", "2"], ["C", "/x:y"]],
  );
  assert.deepEqual(imageEnvironment("FROM b\nUSER 1\n"), []);
  assert.throws(() => imageEnvironment("FROM b\nENV A 1\n"), SyntaxError);
  assert.throws(() => imageEnvironment('FROM b\nENV A="1 2"\n'), SyntaxError);
  const shipped = imageEnvironment(
    await Deno.readTextFile(new URL("../Containerfile", import.meta.url)),
  );
  assert.ok(shipped.some(([name]) => name === "DENO_USE_CGROUPS"), "the repository's image");
});
