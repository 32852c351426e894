import assert from "node:assert/strict";
import { sanitizeDriverName } from "./driver_name.ts";

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
