import assert from "node:assert/strict";

Deno.test("hasOpenssl() fails instead of skipping when OPENSSL_REQUIRED=1 and openssl cannot run", async () => {
  // A child with an empty PATH cannot find openssl; with the variable set it must throw.
  const code = `import { hasOpenssl } from ${
    JSON.stringify(new URL("./pki.ts", import.meta.url).href)
  };
    try { console.log(String(hasOpenssl())); } catch (err) { console.log("threw: " + (err as Error).message); }`;
  const run = async (env: Record<string, string>) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--ext=ts", code],
      env: { PATH: "/nonexistent", ...env },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    return new TextDecoder().decode(out.stdout).trim();
  };
  assert.equal(await run({}), "false");
  assert.equal(
    await run({ OPENSSL_REQUIRED: "1" }),
    "threw: OPENSSL_REQUIRED=1 but the openssl command cannot run here",
  );
});
