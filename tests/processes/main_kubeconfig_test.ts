/**
 * `main.ts` with a kubeconfig it cannot use: one log line naming the file and field, exit status
 * 1, no stack trace and no secret from the file.
 */

import assert from "node:assert/strict";
import { join } from "node:path";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

Deno.test("main.ts exits 1 with one line naming the kubeconfig file and field it cannot use", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const kubeconfig = join(dir, "config");
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:1" } }],
        users: [{
          name: "u",
          user: { "client-certificate-data": btoa("CERT"), "client-key": "admin.key" },
        }],
        contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
        "current-context": "x",
        preferences: { note: "s3cr3t-in-the-file" },
      }),
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", MAIN, `--kubeconfig=${kubeconfig}`, "--dummy"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 1, stderr);
    const errors = stderr.split("\n").filter((l) => l.startsWith("E"));
    assert.equal(errors.length, 1, stderr);
    assert.ok(
      errors[0]!.includes(
        `kubeconfig ${kubeconfig}: users[0] \\"u\\" user.client-key ${join(dir, "admin.key")}: ` +
          "cannot read: no such file",
      ),
      errors[0]!,
    );
    assert.ok(!/^\s+at /m.test(stderr), "no stack trace");
    assert.ok(!stderr.includes("s3cr3t") && !stderr.includes(btoa("CERT")), stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
