import assert from "node:assert/strict";
import { etcdVersionOf, parseKubernetesGoMod, toolsGoMod } from "./pin_kubernetes.ts";

// Abridged from k8s.io/kubernetes v1.37.2's go.mod.
const KUBERNETES_GO_MOD = `module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	go.etcd.io/etcd/client/v3 v3.7.0
	k8s.io/api v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
	k8s.io/sample-apiserver => ./staging/src/k8s.io/sample-apiserver
	k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)
`;

Deno.test("parseKubernetesGoMod() reads the go line, godebug and the staging modules", () => {
  assert.deepEqual(parseKubernetesGoMod(KUBERNETES_GO_MOD), {
    go: "1.26.0",
    godebug: "default=go1.26",
    staging: ["k8s.io/api", "k8s.io/cri-streaming"],
  });
  assert.throws(() => parseKubernetesGoMod("module x\n"), /no go line/);
  assert.throws(() => parseKubernetesGoMod("module x\ngo 1.25.0\n"), /no staging module/);
});

Deno.test("etcdVersionOf() reads the etcd entry of build/dependencies.yaml", () => {
  const yaml = [
    "dependencies:",
    '  - name: "coredns-kube-up"',
    "    version: 1.12.1",
    "  # etcd",
    '  - name: "etcd"',
    "    version: 3.6.6",
    "    refPaths:",
    '  - name: "etcd-image"',
    "    version: 3.6.6-0",
  ].join("\n");
  assert.equal(etcdVersionOf(yaml), "v3.6.6");
  assert.throws(() => etcdVersionOf('  - name: "etcd-image"\n    version: 3.6.6-0\n'), /no etcd/);
});

Deno.test("toolsGoMod() maps each staging module to the release and pins etcd", () => {
  const text = toolsGoMod({
    module: "csiattacher.test/e2e/tools/k8s-1.35",
    version: "v1.35.4",
    kubernetes: parseKubernetesGoMod(KUBERNETES_GO_MOD),
    etcd: "v3.6.6",
  });
  assert.match(text, /^module csiattacher\.test\/e2e\/tools\/k8s-1\.35$/m);
  assert.match(text, /^go 1\.26\.0$/m);
  assert.match(text, /^godebug default=go1\.26$/m);
  assert.match(text, /^\tk8s\.io\/api => k8s\.io\/api v0\.35\.4$/m);
  assert.match(text, /^\tk8s\.io\/cri-streaming => k8s\.io\/cri-streaming v0\.35\.4$/m);
  assert.doesNotMatch(text, /sample-/);
  assert.match(text, /^\tgo\.etcd\.io\/etcd\/server\/v3 v3\.6\.6$/m);
  assert.match(text, /^\tk8s\.io\/kubernetes v1\.35\.4$/m);
  assert.match(text, /^\tk8s\.io\/kubernetes\/cmd\/kube-apiserver$/m);
  assert.throws(
    () =>
      toolsGoMod({
        module: "m",
        version: "1.35",
        kubernetes: parseKubernetesGoMod(KUBERNETES_GO_MOD),
        etcd: "v3.6.6",
      }),
    RangeError,
  );
});
