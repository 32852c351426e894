import assert from "node:assert/strict";
import { finalizerName, leaseName, sanitizeDriverName } from "./names.ts";

Deno.test("sanitizeDriverName() matches the Go attacher's table", () => {
  const cases: [string, string][] = [
    ["csi/test", "csi-test"],
    ["trailing\\", "trailing-X"],
    ["s!a@n#i$t(i%z^e&d*", "s-a-n-i-t-i-z-e-d-X"],
    ["pd.csi.storage.gke.io", "pd-csi-storage-gke-io"],
    ["no-change-needed", "no-change-needed"],
    ["a//b", "a--b"],
  ];
  for (const [input, expected] of cases) {
    assert.equal(sanitizeDriverName(input), expected, input);
  }
});

Deno.test("finalizerName() prefixes the sanitized driver name", () => {
  assert.equal(finalizerName("csi/test"), "external-attacher/csi-test");
  assert.equal(finalizerName("pd.csi.storage.gke.io"), "external-attacher/pd-csi-storage-gke-io");
});

Deno.test("leaseName() sanitizes the whole lock name", () => {
  assert.equal(leaseName("ebs.csi.aws.com"), "external-attacher-leader-ebs-csi-aws-com");
  assert.equal(leaseName("x/"), "external-attacher-leader-x-X");
});
