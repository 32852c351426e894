import assert from "node:assert/strict";
import { join } from "node:path";
import { loadKubeConfig } from "./config.ts";

/** A kubeconfig with one cluster and a token user. */
function kubeconfigYaml(name: string, server: string, extraCluster = ""): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${name}`,
    "  cluster:",
    `    server: ${server}`,
    extraCluster,
    "users:",
    `- name: ${name}`,
    "  user:",
    `    token: token-${name}`,
    "contexts:",
    `- name: ${name}`,
    "  context:",
    `    cluster: ${name}`,
    `    user: ${name}`,
    `current-context: ${name}`,
    "",
  ].filter((l) => l !== "").join("\n");
}

/** A temporary directory removed when disposed. */
async function tempDir(): Promise<AsyncDisposable & { path: string }> {
  const path = await Deno.makeTempDir();
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

Deno.test("loadKubeConfig() with kubeconfigPath loads only that file, paths relative to it", async () => {
  await using dir = await tempDir();
  const file = join(dir.path, "config");
  await Deno.writeTextFile(
    file,
    kubeconfigYaml("a", "https://a.example:6443", "    certificate-authority: ca.crt"),
  );
  const kc = loadKubeConfig({
    kubeconfigPath: file,
    inCluster: { host: "10.0.0.1", port: "443" },
    kubeconfigEnv: "/nonexistent",
  });
  assert.equal(kc.getCurrentCluster()?.server, "https://a.example:6443");
  assert.equal(kc.getCurrentCluster()?.caFile, join(dir.path, "ca.crt"));
  assert.equal(kc.getCurrentUser()?.token, "token-a");
});

Deno.test("loadKubeConfig() names the file it cannot load", () => {
  assert.throws(
    () => loadKubeConfig({ kubeconfigPath: "/nonexistent/kubeconfig" }),
    (err: unknown) =>
      err instanceof Error &&
      err.message.startsWith("cannot load kubeconfig /nonexistent/kubeconfig:") &&
      err.cause !== undefined,
  );
});

Deno.test("loadKubeConfig() in cluster uses the service account token and CA", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(join(dir.path, "token"), "sa-token");
  await Deno.writeTextFile(join(dir.path, "ca.crt"), "not really a certificate");
  const kc = loadKubeConfig({
    inCluster: { host: "10.96.0.1", port: "443", serviceAccountDir: dir.path },
    kubeconfigEnv: "/nonexistent",
  });
  const cluster = kc.getCurrentCluster();
  assert.equal(cluster?.server, "https://10.96.0.1:443");
  assert.equal(cluster?.skipTLSVerify, false);
  const opts: { headers?: Record<string, unknown>; ca?: unknown } = {};
  await kc.applyToHTTPSOptions(opts);
  assert.equal(opts.headers?.Authorization, "Bearer sa-token");
  assert.equal(String(opts.ca), "not really a certificate");

  const v6 = loadKubeConfig({ inCluster: { host: "fd00::1", port: "6443" } });
  assert.equal(v6.getCurrentCluster()?.server, "https://[fd00::1]:6443");
  assert.throws(
    () => loadKubeConfig({ inCluster: { host: "10.96.0.1", port: "" } }),
    /must be defined/,
  );
});

Deno.test("loadKubeConfig() by default merges the KUBECONFIG files, the first one wins", async () => {
  await using dir = await tempDir();
  const a = join(dir.path, "a");
  const b = join(dir.path, "b");
  await Deno.writeTextFile(a, kubeconfigYaml("a", "https://a.example"));
  await Deno.writeTextFile(b, kubeconfigYaml("b", "https://b.example"));
  const kc = loadKubeConfig({ kubeconfigEnv: `${a}:${b}`, home: "/nonexistent" });
  assert.equal(kc.getCurrentCluster()?.server, "https://a.example");
  assert.deepEqual(kc.getClusters().map((c) => c.name), ["a", "b"]);
});

Deno.test("loadKubeConfig() falls back to ~/.kube/config, and fails without any config", async () => {
  await using dir = await tempDir();
  await Deno.mkdir(join(dir.path, ".kube"));
  await Deno.writeTextFile(join(dir.path, ".kube", "config"), kubeconfigYaml("h", "http://h:8080"));
  const kc = loadKubeConfig({ kubeconfigEnv: "", home: dir.path });
  assert.equal(kc.getCurrentCluster()?.server, "http://h:8080");
  assert.throws(
    () => loadKubeConfig({ home: join(dir.path, "nothing") }),
    /no Kubernetes configuration/,
  );
});

Deno.test("loadKubeConfig() refuses a config without a current cluster", async () => {
  await using dir = await tempDir();
  const file = join(dir.path, "config");
  await Deno.writeTextFile(file, "apiVersion: v1\nkind: Config\ncurrent-context: missing\n");
  assert.throws(() => loadKubeConfig({ kubeconfigPath: file }), /no current cluster/);
});
