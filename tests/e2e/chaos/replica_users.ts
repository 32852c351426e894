/**
 * Each chaos replica's own user: the token of its ServiceAccount `csi-attacher-<replica>`, whose
 * namespace's group is {@link REPLICA_GROUP} (`LocalCluster.replicaKubeconfig`), and the RBAC
 * manifest's bindings
 * copied for that group, so the replicas have exactly the attacher's rights and the audit log
 * names the replica behind every request (`user.username`), for either attacher and without a
 * change to either.
 *
 * @module
 */

import { REPLICA_GROUP, replicaUser } from "../cluster.ts";
import { parseManifest } from "../manifests.ts";

const BINDING_KINDS = new Set(["RoleBinding", "ClusterRoleBinding"]);

/**
 * The manifest's RoleBindings and ClusterRoleBindings with `-replicas` appended to their names
 * and `group` as their only subject, as a manifest text for `applyManifest`.
 */
export function groupBindings(manifest: string, group = REPLICA_GROUP): string {
  return parseManifest(manifest)
    .filter((obj) => BINDING_KINDS.has(obj.kind))
    .map((obj) =>
      JSON.stringify({
        ...obj,
        metadata: { ...obj.metadata, name: `${obj.metadata.name}-replicas` },
        subjects: [{ kind: "Group", name: group, apiGroup: "rbac.authorization.k8s.io" }],
      })
    )
    .join("\n---\n");
}

/** Audit user name → replica (its leader-election identity), for `apiWrites`. */
export function replicaOfUser(replicas: readonly string[]): Map<string, string> {
  return new Map(replicas.map((r) => [replicaUser(r), r]));
}
