/**
 * deploy/kubernetes: the RBAC rules against the requests the attacher really makes, and the
 * Deployment against the attacher's command line and the RBAC objects.
 *
 * The requests come from the sandbox scenario (the real attacher, in-process, over HTTP against
 * the in-memory API server): attach, detach and PV release of a volume whose PV names a
 * `controllerPublishSecretRef`, with leader election on (lease, events, release on exit).
 */

import assert from "node:assert/strict";
import yaml from "js-yaml";
import {
  HEALTH_PATH,
  LEADER_ELECTION_HEALTH_PATH,
  parseListenAddress,
} from "../../lib/observe/http_server.ts";
import type { RecordedRequest } from "../../testkit/apiserver/server.ts";
import { parseOptions, validateOptions } from "../../lib/cli/options.ts";
import { componentSettings } from "../../lib/cli/settings.ts";
import { runScenario, SANDBOX_NAMESPACE } from "../../sandbox/scenario.ts";
import { BASE_VERSION } from "../../lib/version.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { connectionFromKubeconfigs } from "../../lib/kube/config.ts";
import { nullLogger } from "../../lib/observe/logger.ts";
import { runAttacher } from "../../lib/run.ts";
import { CSI_NODES, EVENTS, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { CoreEvent } from "../../lib/events/correlator.ts";
import type { VolumeAttachment } from "../../lib/kube/types.ts";

const RBAC_FILE = new URL("../../deploy/kubernetes/rbac.yaml", import.meta.url);
const DEPLOYMENT_FILE = new URL("../../deploy/kubernetes/deployment.yaml", import.meta.url);

interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

interface Manifest {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: PolicyRule[];
  subjects?: { kind: string; name: string; namespace?: string }[];
  roleRef?: { kind: string; name: string; apiGroup: string };
  // deno-lint-ignore no-explicit-any
  spec?: any;
}

/** One permission: `group/resource[/subresource] verb`, in a namespace or cluster-wide (""). */
interface Permission {
  group: string;
  /** `resource` or `resource/subresource`. */
  resource: string;
  verb: string;
}

function key(p: Permission): string {
  return `${p.group === "" ? "core" : p.group} ${p.resource} ${p.verb}`;
}

function loadManifests(url: URL): Manifest[] {
  return yaml.loadAll(Deno.readTextFileSync(url)).filter((d) => d !== null) as Manifest[];
}

function one(manifests: Manifest[], kind: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind);
  assert.equal(found.length, 1, `exactly one ${kind}`);
  return found[0]!;
}

function permissionsOf(rules: PolicyRule[]): Permission[] {
  return rules.flatMap((rule) =>
    rule.apiGroups.flatMap((group) =>
      rule.resources.flatMap((resource) => rule.verbs.map((verb) => ({ group, resource, verb })))
    )
  );
}

/** The rule rbac.yaml keeps commented out (secrets), parsed from its comment lines. */
function optionalRules(text: string): PolicyRule[] {
  const match = text.match(
    /^( *)# (- apiGroups: .*)\n\1# {3}(resources: .*)\n\1# {3}(verbs: .*)$/m,
  );
  assert.ok(match, "rbac.yaml has a commented-out rule");
  return yaml.load(`${match[2]}\n  ${match[3]}\n  ${match[4]}\n`) as PolicyRule[];
}

/** The permission a recorded request needs; undefined for requests that name no resource. */
function permissionOf(r: RecordedRequest): (Permission & { namespace: string }) | undefined {
  if (r.verb === "") return undefined;
  const group = r.path.startsWith("/api/") ? "" : r.path.split("/")[2] ?? "";
  const resource = r.subresource === "" ? r.resource : `${r.resource}/${r.subresource}`;
  return { group, resource, verb: r.verb, namespace: r.namespace };
}

/**
 * Granted and never requested, on purpose: `get` on the resources the attacher reads through
 * informers (list + watch). It adds nothing to `list`, and it keeps the ClusterRole the same as
 * the Go csi-attacher's (see the comment in rbac.yaml). And `list` on the same resources: the
 * informers start with a watch list, which the scenario's server serves; `list` is their
 * fallback for a server that does not.
 */
const GRANTED_UNUSED = new Set([
  "core persistentvolumes get",
  "storage.k8s.io volumeattachments get",
  "storage.k8s.io csinodes get",
  "core persistentvolumes list",
  "storage.k8s.io volumeattachments list",
  "storage.k8s.io csinodes list",
]);

/** Polls `check` every 10 ms until it holds; fails after 20 s. */
async function waitFor(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * The requests of an attach that fails until the driver has the volume (the real attacher,
 * in-process): the Warning Event is created, patched as the failure repeats, and a Normal Event
 * follows the attach.
 */
async function failingAttachRequests(): Promise<RecordedRequest[]> {
  const server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-rbac-" });
  const driver = new ExampleDriver({}, { nodeIds: ["node-1-id"] });
  const driverServer = await driver.start(`${dir}/csi.sock`);
  const connection = await connectionFromKubeconfigs([
    { file: "memory-apiserver", text: server.kubeconfig() },
  ]);
  const clients: KubeClient[] = [];
  const parsed = parseOptions([
    `--csi-address=${driverServer.address}`,
    "--retry-interval-start=10ms",
    "--retry-interval-max=10ms",
  ]);
  assert.ok(parsed.ok);
  const stop = new AbortController();
  const ready = Promise.withResolvers<void>();
  const running = runAttacher(componentSettings(parsed.options), {
    log: nullLogger,
    signal: stop.signal,
    kube: () => {
      const client = new KubeClient({ connection }, {});
      clients.push(client);
      return client;
    },
    env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "rbac" },
    onReady: () => ready.resolve(),
  });
  try {
    await ready.promise;
    const driverName = "example.csi.k8s.io";
    server.create(PERSISTENT_VOLUMES, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv-1" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        capacity: { storage: "1Gi" },
        csi: { driver: driverName, volumeHandle: "vol-1" },
      },
    });
    server.create(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "node-1" },
      spec: { drivers: [{ name: driverName, nodeID: "node-1-id", topologyKeys: null }] },
    });
    server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va-1" },
      spec: { attacher: driverName, nodeName: "node-1", source: { persistentVolumeName: "pv-1" } },
    });
    const events = () => server.list<CoreEvent>(EVENTS, "default").items;
    await waitFor("a repeated Warning Event", () => events().some((e) => e.count >= 2));
    driver.createVolume("vol-1");
    await waitFor("a Normal Event", () => events().some((e) => e.type === "Normal"));
    const warnings = events().filter((e) => e.type === "Warning");
    assert.equal(warnings.length, 1, "one Event object for the repeated failure");
    assert.equal(warnings[0]!.reason, "AttachFailed");
    assert.equal(warnings[0]!.message, "rpc error: code = NotFound desc = volume vol-1 not found");
    assert.ok(server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-1").status?.attached);
    return [...server.requests];
  } finally {
    stop.abort();
    await running;
    for (const client of clients) await client.close();
    await driverServer.close();
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("rbac.yaml grants exactly the requests of attach, detach, release, secrets, leader election and Events", async () => {
  const text = Deno.readTextFileSync(RBAC_FILE);
  const manifests = loadManifests(RBAC_FILE);
  const clusterRole = one(manifests, "ClusterRole");
  const role = one(manifests, "Role");
  const clusterWide = permissionsOf(clusterRole.rules ?? []);
  const namespaced = permissionsOf(role.rules ?? []);
  const optional = permissionsOf(optionalRules(text));
  assert.deepEqual(optional.map(key), ["core secrets get"]);

  const lines: string[] = [];
  const report = await runScenario({
    volumeHandle: "vol-1",
    nodeId: "node-1-id",
    nodeName: "node-1",
    accessMode: "ReadWriteOnce",
    fsType: "",
    readOnly: false,
    volumeAttributes: {},
    secret: { password: "p" },
    waitTimeoutMs: 30_000,
    attacherArgs: ["--leader-election"],
  }, { write: (line) => lines.push(line) });
  assert.equal(report.exitCode, 0, lines.join("\n"));

  const used = new Map<string, Permission & { namespace: string }>();
  for (const request of [...report.requests, ...await failingAttachRequests()]) {
    const permission = permissionOf(request);
    assert.ok(permission, `request without a resource: ${request.method} ${request.path}`);
    used.set(`${key(permission)} ${permission.namespace}`, permission);
  }
  const usedKeys = new Set([...used.values()].map(key));
  // The scenario covers every kind of request the attacher makes.
  assert.deepEqual([...usedKeys].sort(), [
    "coordination.k8s.io leases create",
    "coordination.k8s.io leases get",
    "coordination.k8s.io leases update",
    "core events create",
    "core events patch",
    "core persistentvolumes patch",
    "core persistentvolumes watch",
    "core secrets get",
    "storage.k8s.io csinodes watch",
    "storage.k8s.io volumeattachments patch",
    "storage.k8s.io volumeattachments watch",
    "storage.k8s.io volumeattachments/status patch",
  ]);

  // Every request is allowed: cluster-wide by the ClusterRole (or the optional secrets rule),
  // namespaced ones in the Role's namespace by the Role.
  const clusterKeys = new Set(clusterWide.map(key));
  const roleKeys = new Set(namespaced.map(key));
  const optionalKeys = new Set(optional.map(key));
  for (const permission of used.values()) {
    const k = key(permission);
    const allowed = clusterKeys.has(k) || optionalKeys.has(k) ||
      (permission.namespace === role.metadata.namespace && roleKeys.has(k));
    assert.ok(allowed, `not granted: ${k} (namespace "${permission.namespace}")`);
  }
  assert.equal(role.metadata.namespace, SANDBOX_NAMESPACE, "the scenario's lease namespace");

  // Nothing is granted that is not used, except the documented exceptions.
  for (const permission of [...clusterWide, ...namespaced]) {
    const k = key(permission);
    if (GRANTED_UNUSED.has(k)) {
      assert.ok(!usedKeys.has(k), `${k} is used now: drop it from GRANTED_UNUSED`);
      continue;
    }
    assert.ok(usedKeys.has(k), `granted but never requested: ${k}`);
  }
});

Deno.test("rbac.yaml binds both roles to the csi-attacher ServiceAccount", () => {
  const manifests = loadManifests(RBAC_FILE);
  const account = one(manifests, "ServiceAccount");
  const clusterRole = one(manifests, "ClusterRole");
  const role = one(manifests, "Role");
  const subject = {
    kind: "ServiceAccount",
    name: account.metadata.name,
    namespace: account.metadata.namespace,
  };
  const clusterBinding = one(manifests, "ClusterRoleBinding");
  assert.deepEqual(clusterBinding.subjects, [subject]);
  assert.deepEqual(clusterBinding.roleRef, {
    kind: "ClusterRole",
    name: clusterRole.metadata.name,
    apiGroup: "rbac.authorization.k8s.io",
  });
  const binding = one(manifests, "RoleBinding");
  assert.equal(binding.metadata.namespace, role.metadata.namespace);
  assert.deepEqual(binding.subjects, [subject]);
  assert.deepEqual(binding.roleRef, {
    kind: "Role",
    name: role.metadata.name,
    apiGroup: "rbac.authorization.k8s.io",
  });
  assert.equal(role.metadata.namespace, account.metadata.namespace);
});

Deno.test("deployment.yaml runs the attacher with valid flags beside the driver it names", () => {
  const account = one(loadManifests(RBAC_FILE), "ServiceAccount");
  const deployment = one(loadManifests(DEPLOYMENT_FILE), "Deployment");
  assert.equal(deployment.metadata.namespace, account.metadata.namespace);
  const pod = deployment.spec.template.spec;
  assert.equal(pod.serviceAccountName, account.metadata.name);
  assert.equal(pod.securityContext.runAsNonRoot, true);
  // deno-lint-ignore no-explicit-any
  const containers: any[] = pod.containers;
  const attacher = containers.find((c) => c.name === "csi-attacher");
  const driver = containers.find((c) => c.name !== "csi-attacher");
  assert.ok(attacher && driver, "an attacher and a driver container");
  assert.equal(
    attacher.image.split(":").at(-1),
    BASE_VERSION,
    "image tag is the attacher's version",
  );

  // The arguments are a valid attacher command line.
  const parsed = parseOptions(attacher.args);
  assert.ok(parsed.ok, `attacher args: ${JSON.stringify(parsed)}`);
  const options = parsed.options;
  assert.equal(validateOptions(options), undefined);
  assert.equal(options.leaderElection, true);
  assert.equal(options.verbosity, 5);

  // Liveness on /healthz/leader-election of the --http-endpoint port.
  const probe = attacher.livenessProbe.httpGet;
  assert.equal(probe.path, LEADER_ELECTION_HEALTH_PATH);
  // deno-lint-ignore no-explicit-any
  const port = attacher.ports.find((p: any) =>
    p.name === probe.port || p.containerPort === probe.port
  );
  assert.equal(port?.containerPort, parseListenAddress(options.httpEndpoint).port);
  // Readiness on /healthz (ok on a standby too) of the same port.
  assert.equal(attacher.readinessProbe.httpGet.path, HEALTH_PATH);
  assert.equal(attacher.readinessProbe.httpGet.port, probe.port);

  // The Lease namespace comes from the downward API.
  // deno-lint-ignore no-explicit-any
  const podNamespace = attacher.env.find((e: any) => e.name === "POD_NAMESPACE");
  assert.equal(podNamespace?.valueFrom?.fieldRef?.fieldPath, "metadata.namespace");

  // Read-only root, no privilege escalation.
  assert.equal(attacher.securityContext.readOnlyRootFilesystem, true);
  assert.equal(attacher.securityContext.allowPrivilegeEscalation, false);
  assert.ok(attacher.resources?.limits?.memory, "a memory limit (the heap is sized from it)");

  // Both containers mount the same volume where the socket is, and the driver listens on it.
  const socketDir = options.csiAddress.slice(0, options.csiAddress.lastIndexOf("/"));
  // deno-lint-ignore no-explicit-any
  const mountOf = (c: any) => c.volumeMounts.find((m: any) => m.mountPath === socketDir)?.name;
  assert.ok(mountOf(attacher), `attacher mounts ${socketDir}`);
  assert.equal(mountOf(driver), mountOf(attacher));
  // deno-lint-ignore no-explicit-any
  const volume = pod.volumes.find((v: any) => v.name === mountOf(attacher));
  assert.deepEqual(volume?.emptyDir, {});
  assert.ok(driver.args.includes(`--endpoint=unix://${options.csiAddress}`), "driver endpoint");
  assert.ok(driver.args.includes("--enable-attach"), "driver publishes volumes");
});
