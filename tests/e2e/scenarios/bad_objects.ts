/**
 * Scenario 7: VolumeAttachments that cannot attach yet get the Go attacher's `attachError` texts
 * (as rows of external-attacher's TestCSIHandler in `pkg/controller/csi_handler_test.go`) and a
 * Warning Event with the same text, and attach once the missing object appears (a Normal Event).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { PUBLISH } from "../driver_log.ts";
import { waitForLog, waitUntil } from "../kit.ts";
import { csiNode, node, PATHS, secret } from "../objects.ts";
import { ATTACHER_USER } from "../cluster.ts";
import { READY_LINE } from "./round_trip.ts";

const SECRET_VALUE = "e2e-secret-value-7f3a";

/** Waits for the attachError `expected` on `va`, fixes the cause with `fix`, waits for attach. */
async function expectErrorThenAttach(
  ctx: ScenarioContext,
  va: string,
  expected: string,
  fix: () => Promise<void>,
): Promise<void> {
  const message = await waitUntil(`attachError "${expected}" on ${va}`, async () => {
    const obj = await ctx.kit.va(va);
    const msg = obj?.status?.attachError?.message;
    return msg === expected ? msg : undefined;
  }, 60_000);
  assert.equal(message, expected);
  const obj = await ctx.kit.va(va);
  assert.equal(obj?.status?.attached ?? false, false);
  assert.equal(obj?.status?.attachError?.errorCode, undefined, "no errorCode for a non-gRPC error");
  await fix();
  const attached = await ctx.kit.waitAttached(va, 60_000);
  assert.equal(attached.status?.attachError ?? undefined, undefined, "attachError cleared");
  // Beyond the Go attacher: the failure is a Warning Event with the attachError text, and the
  // attach that follows a Normal one (VolumeAttachments are cluster-scoped: namespace default).
  const events = await waitUntil(`Warning and Normal Events of ${va}`, async () => {
    const list = await ctx.kit.api.getOk<{ items: VaEvent[] }>(
      `/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D${va}`,
    );
    const warning = list.items.find((e) =>
      e.type === "Warning" && e.reason === "AttachFailed" && e.message === expected
    );
    const normal = list.items.find((e) => e.type === "Normal" && e.reason === "Attached");
    return warning && normal ? { warning, normal } : undefined;
  }, 30_000);
  assert.equal(events.warning.message, expected);
  assert.equal(events.warning.involvedObject.kind, "VolumeAttachment");
  assert.ok(events.warning.count >= 1);
}

/** The fields of a core/v1 Event the scenario reads. */
interface VaEvent {
  type: string;
  reason: string;
  message: string;
  count: number;
  involvedObject: { kind: string; name: string };
}

/** Missing PV, node without CSINode, missing secret (forbidden first, then not found). */
export async function badObjects(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const attacher = ctx.startAttacher("a");
  await waitForLog(attacher, READY_LINE);

  // Row 20: a VA naming a PV that does not exist.
  const missingPv = `${kit.prefix}-missing-pv`;
  const missingPvVolume = await ctx.cluster.driver().createVolume(missingPv);
  const vaMissingPv = await kit.createVa("missing-pv", ctx.nodes[0]!, missingPv);
  await expectErrorThenAttach(
    ctx,
    vaMissingPv,
    `persistentvolume "${missingPv}" not found`,
    () => kit.createPv(missingPv, missingPvVolume),
  );

  // Rows 24/29: a node (a Node object exists) without CSINode.
  const bareNode = `${kit.prefix}-bare-node`;
  await kit.api.createOk(PATHS.nodes, node(bareNode));
  kit.track(`${PATHS.nodes}/${bareNode}`);
  const { pv: pvBare } = await kit.makeVolume("bare");
  const vaBare = await kit.createVa("bare-node", bareNode, pvBare);
  await expectErrorThenAttach(
    ctx,
    vaBare,
    `csinode.storage.k8s.io "${bareNode}" not found`,
    async () => {
      await kit.api.createOk(
        PATHS.csiNodes,
        csiNode(bareNode, ctx.cluster.info.driverName, ctx.nodeId),
      );
      kit.track(`${PATHS.csiNodes}/${bareNode}`);
    },
  );

  // Row 13: a missing secret. The shipped RBAC leaves secrets out (optional), so first the API
  // server's Forbidden text, then, with read access granted, the NotFound text.
  const secretName = `${kit.prefix}-publish-secret`;
  const { pv: pvSecret, volumeId: secretVolume } = await kit.makeVolume("secret", {
    secretRef: { name: secretName, namespace: "default" },
  });
  const vaSecret = await kit.createVa("missing-secret", ctx.nodes[1]!, pvSecret);
  const forbidden = `failed to load secret "default/${secretName}": secrets "${secretName}" is ` +
    `forbidden: User "${ATTACHER_USER}" cannot get resource "secrets" in API group "" in the ` +
    `namespace "default"`;
  await waitUntil(`attachError "${forbidden}"`, async () => {
    return (await kit.va(vaSecret))?.status?.attachError?.message === forbidden;
  }, 60_000);
  await grantSecretRead(ctx);
  await expectErrorThenAttach(
    ctx,
    vaSecret,
    `failed to load secret "default/${secretName}": secrets "${secretName}" not found`,
    async () => {
      await kit.api.createOk(
        PATHS.secrets("default"),
        secret(secretName, "default", { secretKey: SECRET_VALUE }),
      );
      kit.track(`${PATHS.secrets("default")}/${secretName}`);
    },
  );
  const publish = (await ctx.cluster.driverCalls()).find((c) =>
    c.method === PUBLISH && c.request.volume_id === secretVolume && c.error === ""
  );
  assert.deepEqual(
    publish?.request.secrets,
    { secretKey: SECRET_VALUE },
    "secrets reach the driver",
  );
  assert.ok(!(await attacher.output()).includes(SECRET_VALUE), "the attacher never logs secrets");
}

/** Binds a ClusterRole with `get` on secrets to the attacher (the manifest's optional rule). */
async function grantSecretRead(ctx: ScenarioContext): Promise<void> {
  const name = `${ctx.kit.prefix}-attacher-secrets`;
  await ctx.kit.api.createOk("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name },
    rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }],
  });
  ctx.kit.track(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
  await ctx.kit.api.createOk("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    subjects: [{ kind: "ServiceAccount", name: "csi-attacher", namespace: "default" }],
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
  });
  ctx.kit.track(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
}
