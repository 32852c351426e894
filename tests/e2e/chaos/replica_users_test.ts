import assert from "node:assert/strict";
import { REPLICA_GROUP } from "../cluster.ts";
import { parseManifest } from "../manifests.ts";
import { DEPLOY_RBAC } from "../settings.ts";
import { groupBindings, replicaOfUser } from "./replica_users.ts";

Deno.test("groupBindings() binds the replicas' group to each role the manifest binds", async () => {
  const manifest = await Deno.readTextFile(DEPLOY_RBAC);
  const original = parseManifest(manifest).filter((o) => o.kind.endsWith("Binding"));
  const copies = parseManifest(groupBindings(manifest)) as unknown as {
    kind: string;
    metadata: { name: string; namespace?: string };
    subjects: unknown[];
    roleRef: unknown;
  }[];
  assert.ok(original.length >= 2);
  assert.deepEqual(
    copies.map((c) => [c.kind, c.metadata.name, c.metadata.namespace]),
    original.map((o) => [o.kind, `${o.metadata.name}-replicas`, o.metadata.namespace]),
  );
  for (const [i, c] of copies.entries()) {
    assert.deepEqual(c.subjects, [
      { kind: "Group", name: REPLICA_GROUP, apiGroup: "rbac.authorization.k8s.io" },
    ]);
    assert.deepEqual(c.roleRef, (original[i] as unknown as { roleRef: unknown }).roleRef);
  }
});

Deno.test("replicaOfUser() maps each replica's ServiceAccount user back to its identity", () => {
  assert.deepEqual([...replicaOfUser(["chaos-0", "chaos-1"])], [
    ["system:serviceaccount:csi-attacher-e2e-replicas:csi-attacher-chaos-0", "chaos-0"],
    ["system:serviceaccount:csi-attacher-e2e-replicas:csi-attacher-chaos-1", "chaos-1"],
  ]);
  // A ServiceAccount token's groups: its namespace's is the one the audit policy selects.
  assert.equal(REPLICA_GROUP, "system:serviceaccounts:csi-attacher-e2e-replicas");
});
