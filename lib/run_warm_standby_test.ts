/**
 * runAttacher() with `--leader-election` (dummy mode, the in-memory API server): a warm standby
 * reads its caches before it holds the Lease but writes nothing, and its term works from those
 * caches without listing again; with `--feature-gates=WarmStandby=false` it lists only in the
 * term, as the Go attacher does.
 */

import assert from "node:assert/strict";
import { MemoryApiServer } from "../testkit/apiserver/server.ts";
import { pv, va } from "../testkit/harness/fixtures.ts";
import { parseOptions } from "./cli/options.ts";
import { componentSettings } from "./cli/settings.ts";
import { DUMMY_DRIVER_NAME } from "./controller/names.ts";
import { LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "./kube/api.ts";
import { KubeClient } from "./kube/client.ts";
import { connectionFromKubeconfigs } from "./kube/config.ts";
import type { KubeObject, VolumeAttachment } from "./kube/types.ts";
import { leaseName } from "./leaderelection/config.ts";
import { nullLogger } from "./observe/logger.ts";
import { runAttacher } from "./run.ts";

const LEASE = leaseName(DUMMY_DRIVER_NAME);

/** Microseconds RFC 3339, as Lease times are written. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace("Z", "000Z");
}

/**
 * Runs replica r1 while "other" holds the Lease; once r1 has read both watch lists (or, when it
 * reads none as a standby, once it has asked for the Lease a few times) the Lease is handed back,
 * and r1 stops once its term attached the VolumeAttachment. Returns the requests r1 made before
 * the hand-back and all of them.
 */
async function standbyThenLead(gates: string[]) {
  const server = await MemoryApiServer.start();
  const clients: KubeClient[] = [];
  try {
    server.create(PERSISTENT_VOLUMES, pv(null));
    const attachment = va(false);
    attachment.spec.attacher = DUMMY_DRIVER_NAME;
    server.create(VOLUME_ATTACHMENTS, attachment);
    const now = Date.now();
    server.create(LEASES, {
      metadata: { name: LEASE, namespace: "default" },
      spec: {
        holderIdentity: "other",
        leaseDurationSeconds: 15,
        acquireTime: microTime(now),
        renewTime: microTime(now),
      },
    } as KubeObject);
    const connection = await connectionFromKubeconfigs([
      { file: "memory-apiserver", text: server.kubeconfig() },
    ]);
    const stop = new AbortController();
    let standbyRequests: typeof server.requests | undefined;
    const handBack = () => {
      if (standbyRequests !== undefined) return;
      standbyRequests = server.requests.slice();
      const lease = server.get<KubeObject & { spec: Record<string, unknown> }>(
        LEASES,
        LEASE,
        "default",
      );
      lease.spec.holderIdentity = "";
      server.update(LEASES, lease);
    };
    const listed = new Set<string>();
    server.onWatchListSent((resource) => {
      listed.add(resource);
      if (listed.has("volumeattachments") && listed.has("persistentvolumes")) handBack();
    });
    server.onEvent((ev) => {
      const attached = (ev.object as VolumeAttachment).status?.attached;
      if (ev.resource === "volumeattachments" && attached) stop.abort();
    });
    const leaseReads = () =>
      server.requests.filter((r) => r.resource === "leases" && r.verb === "get").length;
    const wait = setInterval(() => {
      if (leaseReads() >= 3) handBack();
    }, 20);
    try {
      const parsed = parseOptions([
        "--dummy",
        "--leader-election",
        "--leader-election-namespace=default",
        "--leader-election-retry-period=100ms",
        ...gates,
      ]);
      assert.ok(parsed.ok);
      await runAttacher(componentSettings(parsed.options), {
        log: nullLogger,
        signal: stop.signal,
        kube: (observer) => {
          const client = new KubeClient({ connection, observer }, {});
          clients.push(client);
          return client;
        },
        env: { exit: () => stop.abort(), writeTerminationMessage: () => {}, hostname: () => "r1" },
      });
    } finally {
      clearInterval(wait);
    }
    assert.ok(standbyRequests !== undefined, "the Lease was handed back");
    return { before: standbyRequests, all: server.requests.slice() };
  } finally {
    for (const client of clients) await client.close();
    await server.close();
  }
}

const watchLists = (
  requests: readonly { verb: string; resource: string; query: Record<string, string> }[],
) =>
  requests.filter((r) => r.verb === "watch" && r.query.sendInitialEvents === "true")
    .map((r) => r.resource).sort();

Deno.test("a warm standby reads its caches before its Lease, writes nothing, and its term lists no more", async () => {
  const { before, all } = await standbyThenLead([]);
  assert.deepEqual(watchLists(before), ["csinodes", "persistentvolumes", "volumeattachments"]);
  const writes = before.filter((r) => r.verb !== "get" && r.verb !== "list" && r.verb !== "watch");
  assert.deepEqual(
    writes.map((r) => `${r.verb} ${r.resource}`),
    [],
    "a standby sends no write",
  );
  assert.deepEqual(watchLists(all), watchLists(before), "the term read no list of its own");
  assert.ok(
    all.some((r) => r.resource === "volumeattachments" && r.verb === "patch"),
    "the term attached the VolumeAttachment from the standby's cache",
  );
});

Deno.test("with WarmStandby=false a standby reads nothing before its Lease", async () => {
  const { before, all } = await standbyThenLead(["--feature-gates=WarmStandby=false"]);
  assert.deepEqual(watchLists(before), []);
  assert.deepEqual(watchLists(all), ["csinodes", "persistentvolumes", "volumeattachments"]);
});
