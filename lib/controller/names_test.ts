import assert from "node:assert/strict";
import { finalizerName, leaseName } from "./names.ts";

Deno.test("finalizerName() prefixes the sanitized driver name", () => {
  assert.equal(finalizerName("csi/test"), "external-attacher/csi-test");
  assert.equal(finalizerName("pd.csi.storage.gke.io"), "external-attacher/pd-csi-storage-gke-io");
});

Deno.test("leaseName() sanitizes the whole lock name", () => {
  assert.equal(leaseName("ebs.csi.aws.com"), "external-attacher-leader-ebs-csi-aws-com");
  assert.equal(leaseName("x/"), "external-attacher-leader-x-X");
});
