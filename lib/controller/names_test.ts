import assert from "node:assert/strict";
import { finalizerName } from "./names.ts";

Deno.test("finalizerName() prefixes the sanitized driver name", () => {
  assert.equal(finalizerName("csi/test"), "external-attacher/csi-test");
  assert.equal(finalizerName("pd.csi.storage.gke.io"), "external-attacher/pd-csi-storage-gke-io");
});
