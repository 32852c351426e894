import assert from "node:assert/strict";
import { runtimeFlags } from "./shipped_form.ts";

Deno.test("runtimeFlags() keeps a task's permissions and V8 flags only", () => {
  assert.deepEqual(
    runtimeFlags(
      "deno compile --frozen --allow-net --allow-read --v8-flags=--max-semi-space-size=1 " +
        "--output dist/csi-attacher main.ts",
    ),
    ["--allow-net", "--allow-read", "--v8-flags=--max-semi-space-size=1"],
  );
});
