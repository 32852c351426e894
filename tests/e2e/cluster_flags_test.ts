import assert from "node:assert/strict";
import { mockDriverFlags } from "./cluster.ts";

const INFO = { driverSocket: "/c/csi/csi.sock", driverName: "io.kubernetes.storage.mock" };

Deno.test("mock driver flags: a state file unless the cluster goes without one", () => {
  assert.deepEqual(mockDriverFlags("/c", INFO, { driverArgs: ["--abort-busy-volumes"] }), [
    "--endpoint=/c/csi/csi.sock",
    "--name=io.kubernetes.storage.mock",
    "--state-file=/c/csi/driver-state.json",
    "--fault-file=/c/csi/driver-fault.json",
    "--abort-busy-volumes",
    "--v=3",
  ]);
  const without = mockDriverFlags("/c", INFO, { driverStateFile: false });
  assert.ok(!without.some((flag) => flag.startsWith("--state-file")), without.join(" "));
  assert.ok(without.includes("--fault-file=/c/csi/driver-fault.json"));
});
