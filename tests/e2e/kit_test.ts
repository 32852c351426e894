import assert from "node:assert/strict";
import { exampleManifest } from "./cluster_cli.ts";
import { controllerVaName, uniqueVolumeName } from "./kit.ts";
import { parseManifest } from "./manifests.ts";

Deno.test("controllerVaName() is the attach/detach controller's VolumeAttachment name", async () => {
  // Seen in a deno task cluster session: kube-controller-manager v1.34.4 named the
  // VolumeAttachment of mock volume 4 on node-1 so.
  assert.equal(
    await controllerVaName("4", "io.kubernetes.storage.mock", "node-1"),
    "csi-ac92511db903487e745b9a90a54abb2c469b101d073689e95f5444c75900cbe1",
  );
  assert.notEqual(
    await controllerVaName("4", "io.kubernetes.storage.mock", "node-2"),
    await controllerVaName("4", "io.kubernetes.storage.mock", "node-1"),
  );
});

Deno.test("uniqueVolumeName() is the name in a Node's status.volumesAttached", () => {
  assert.equal(
    uniqueVolumeName("io.kubernetes.storage.mock", "4"),
    "kubernetes.io/csi/io.kubernetes.storage.mock^4",
  );
});

Deno.test("exampleManifest() holds a PV of the volume, a PVC bound to it and a Pod using it", () => {
  const objects = parseManifest(exampleManifest("drv.example.com", "17")) as unknown as {
    kind: string;
    metadata: { name: string };
    spec: Record<string, unknown>;
  }[];
  assert.deepEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`), [
    "PersistentVolume/example-pv",
    "PersistentVolumeClaim/example-pvc",
    "Pod/example",
  ]);
  const [pv, pvc, pod] = objects;
  assert.deepEqual(pv!.spec.csi, { driver: "drv.example.com", volumeHandle: "17", fsType: "ext4" });
  assert.equal(pvc!.spec.volumeName, "example-pv");
  assert.equal(pvc!.spec.storageClassName, pv!.spec.storageClassName);
  assert.equal(pod!.spec.nodeName, "node-1");
  assert.deepEqual(pod!.spec.volumes, [{
    name: "data",
    persistentVolumeClaim: { claimName: "example-pvc" },
  }]);
});
