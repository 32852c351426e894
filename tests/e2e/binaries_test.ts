import assert from "node:assert/strict";
import { DEFAULT_KUBERNETES, KUBERNETES_RELEASES, kubernetesRelease } from "./binaries.ts";

Deno.test("kubernetesRelease() takes a minor or a release and defaults to the newest", () => {
  assert.equal(DEFAULT_KUBERNETES.minor, "1.37");
  assert.equal(kubernetesRelease(undefined), DEFAULT_KUBERNETES);
  assert.equal(kubernetesRelease(" "), DEFAULT_KUBERNETES);
  assert.equal(kubernetesRelease("1.35").version, "v1.35.4");
  assert.equal(kubernetesRelease("v1.36.3").minor, "1.36");
  assert.equal(kubernetesRelease("1.37.2").minor, "1.37");
  assert.throws(() => kubernetesRelease("1.34"), /supported: 1\.37 \(v1\.37\.2\), 1\.36/);
  assert.throws(() => kubernetesRelease("1.35.3"), RangeError);
});

Deno.test("each supported release has its own pinned Go module at that release", async () => {
  const dirs = new Set<string>();
  for (const release of KUBERNETES_RELEASES) {
    dirs.add(release.toolsDir);
    const goMod = await Deno.readTextFile(`${release.toolsDir}go.mod`);
    assert.match(
      goMod,
      new RegExp(
        `^\\s*k8s\\.io/kubernetes ${release.version.replaceAll(".", "\\.")}( // indirect)?$`,
        "m",
      ),
    );
    const staging = `v0.${release.version.split(".").slice(1).join(".")}`;
    assert.match(
      goMod,
      new RegExp(
        `k8s\\.io/apiserver => k8s\\.io/apiserver ${staging.replaceAll(".", "\\.")}$`,
        "m",
      ),
    );
    await Deno.stat(`${release.toolsDir}go.sum`);
  }
  assert.equal(dirs.size, KUBERNETES_RELEASES.length);
});
