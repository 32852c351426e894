/**
 * Applying a multi-document YAML manifest (ServiceAccounts, RBAC, Namespaces) with create, or
 * replace when the object exists, as `kubectl apply` would for these simple kinds.
 *
 * @module
 */

import yaml from "js-yaml";
import type { RawApi } from "./raw_api.ts";
import { UnexpectedStatusError } from "./raw_api.ts";

interface Kind {
  base: string;
  plural: string;
  namespaced: boolean;
}

const KINDS: Record<string, Kind> = {
  "v1/ServiceAccount": { base: "/api/v1", plural: "serviceaccounts", namespaced: true },
  "v1/Namespace": { base: "/api/v1", plural: "namespaces", namespaced: false },
  "rbac.authorization.k8s.io/v1/ClusterRole": {
    base: "/apis/rbac.authorization.k8s.io/v1",
    plural: "clusterroles",
    namespaced: false,
  },
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
    base: "/apis/rbac.authorization.k8s.io/v1",
    plural: "clusterrolebindings",
    namespaced: false,
  },
  "rbac.authorization.k8s.io/v1/Role": {
    base: "/apis/rbac.authorization.k8s.io/v1",
    plural: "roles",
    namespaced: true,
  },
  "rbac.authorization.k8s.io/v1/RoleBinding": {
    base: "/apis/rbac.authorization.k8s.io/v1",
    plural: "rolebindings",
    namespaced: true,
  },
};

interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; resourceVersion?: string };
}

/** The objects of a YAML text, as plain JSON values. */
export function parseManifest(text: string): ManifestObject[] {
  return yaml.loadAll(text)
    .filter((doc) => doc !== null && doc !== undefined)
    .map((doc) => JSON.parse(JSON.stringify(doc)) as ManifestObject);
}

/**
 * Creates every object of `text`, replacing those that exist. Namespaced objects without a
 * namespace go to `defaultNamespace`. Returns `kind/name` of each object applied.
 *
 * @throws {RangeError} for a kind this helper does not know.
 * @throws {UnexpectedStatusError} when the server refuses an object.
 */
export async function applyManifest(
  api: RawApi,
  text: string,
  defaultNamespace = "default",
): Promise<string[]> {
  const applied: string[] = [];
  for (const obj of parseManifest(text)) {
    const kind = KINDS[`${obj.apiVersion}/${obj.kind}`];
    if (kind === undefined) throw new RangeError(`cannot apply ${obj.apiVersion} ${obj.kind}`);
    const ns = obj.metadata.namespace ?? defaultNamespace;
    if (kind.namespaced) obj.metadata.namespace = ns;
    const collection = kind.namespaced
      ? `${kind.base}/namespaces/${ns}/${kind.plural}`
      : `${kind.base}/${kind.plural}`;
    const created = await api.request("POST", collection, { body: obj });
    if (created.status === 409) {
      const path = `${collection}/${obj.metadata.name}`;
      const current = await api.getOk<ManifestObject>(path);
      obj.metadata.resourceVersion = current.metadata.resourceVersion;
      const replaced = await api.request("PUT", path, { body: obj });
      if (replaced.status !== 200) throw new UnexpectedStatusError(`PUT ${path}`, replaced);
    } else if (created.status !== 201) {
      throw new UnexpectedStatusError(`POST ${collection}`, created);
    }
    applied.push(`${obj.kind}/${obj.metadata.name}`);
  }
  return applied;
}
