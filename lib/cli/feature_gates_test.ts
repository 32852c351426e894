import assert from "node:assert/strict";
import { resolveFeatureGates } from "./feature_gates.ts";

Deno.test("resolveFeatureGates() applies AllAlpha and AllBeta below explicit settings", () => {
  assert.deepEqual(resolveFeatureGates({ AllAlpha: true }), {
    ReleaseLeaderElectionOnExit: true,
    MutableCSINodeAllocatableCount: true,
    WarmStandby: true,
  });
  assert.deepEqual(resolveFeatureGates({ AllAlpha: true, ReleaseLeaderElectionOnExit: false }), {
    ReleaseLeaderElectionOnExit: false,
    MutableCSINodeAllocatableCount: true,
    WarmStandby: true,
  });
  // AllBeta turns off the beta WarmStandby, but not the GA MutableCSINodeAllocatableCount.
  assert.deepEqual(resolveFeatureGates({ AllBeta: false }), {
    ReleaseLeaderElectionOnExit: true,
    MutableCSINodeAllocatableCount: true,
    WarmStandby: false,
  });
  assert.deepEqual(resolveFeatureGates({ AllBeta: false, WarmStandby: true }).WarmStandby, true);
  assert.throws(() => resolveFeatureGates({ releaseleaderelectiononexit: true }), {
    message: "unrecognized feature gate: releaseleaderelectiononexit",
  });
});
