/**
 * Two attacher processes with leader election against the fake API server: exactly one works;
 * SIGTERM hands over within the retry period (the lease is released); SIGKILL hands over within
 * the lease duration; a standby never touches a VolumeAttachment.
 */

import assert from "node:assert/strict";
import { LEASES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { Lease, VolumeAttachment } from "../../lib/kube/types.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const LEASE = "external-attacher-leader-csi-dummy";
// Short enough that the SIGKILL hand-over (which waits out the lease) takes seconds, long enough
// that a leader on a loaded machine renews well within the deadline (client-go's rule:
// lease duration > renew deadline > 1.2 × retry period).
const RETRY_MS = 400;
const LEASE_MS = 4000;
const RENEW_MS = 3000;

/** One attacher child process and its log. */
class Replica {
  readonly name: string;
  readonly process: Deno.ChildProcess;
  log = "";
  #done: Promise<void>;

  constructor(name: string, kubeconfig: string) {
    this.name = name;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        MAIN,
        "--dummy",
        `--kubeconfig=${kubeconfig}`,
        "--leader-election",
        "--leader-election-namespace=default",
        `--leader-election-lease-duration=${LEASE_MS}ms`,
        `--leader-election-renew-deadline=${RENEW_MS}ms`,
        `--leader-election-retry-period=${RETRY_MS}ms`,
        "--v=2",
      ],
      env: { HOSTNAME: name },
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.process = child;
    this.#done = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child.stderr) this.log += decoder.decode(chunk);
    })();
  }

  async stop(signal: Deno.Signal): Promise<Deno.CommandStatus> {
    try {
      this.process.kill(signal);
    } catch {
      // already exited
    }
    const status = await this.process.status;
    await this.#done;
    return status;
  }
}

function holder(server: MemoryApiServer): string | undefined {
  return server.find<Lease>(LEASES, LEASE, "default")?.spec.holderIdentity ?? undefined;
}

/** Resolves when `pred()` holds, re-checked on every change in the server; rejects after `ms`. */
function until(server: MemoryApiServer, what: string, pred: () => boolean, ms = 30_000) {
  return new Promise<number>((resolve, reject) => {
    const started = Date.now();
    const check = () => {
      if (!pred()) return;
      clearTimeout(timer);
      unsubscribe();
      resolve(Date.now() - started);
    };
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`timed out waiting for ${what}`));
    }, ms);
    const unsubscribe = server.onEvent(check);
    check();
  });
}

function va(name: string): VolumeAttachment {
  return {
    metadata: { name },
    spec: { attacher: "csi/dummy", nodeName: "node1", source: { persistentVolumeName: name } },
  };
}

function attached(server: MemoryApiServer, name: string): boolean {
  return server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name)?.status?.attached === true;
}

/** The VAs a replica marked attached, from its log. */
function marked(replica: Replica): string[] {
  return [...replica.log.matchAll(/"Marked as attached" volumeAttachment="([^"]+)"/g)].map((m) =>
    m[1]!
  );
}

/** Log text before the replica acquired the lease. */
function beforeLeading(replica: Replica): string {
  const at = replica.log.indexOf("Successfully acquired lease");
  return at < 0 ? replica.log : replica.log.slice(0, at);
}

Deno.test("leader election: one replica works, SIGTERM and SIGKILL hand over to the standby", async () => {
  await using server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-le-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(kubeconfig, server.kubeconfig());
  const replicas: Replica[] = [];
  try {
    const a = new Replica("replica-a", kubeconfig);
    replicas.push(a);
    await until(server, "replica-a to lead", () => holder(server) === "replica-a");
    const b = new Replica("replica-b", kubeconfig);
    replicas.push(b);
    // b is running as a standby once it has seen the lease held by a.
    await until(server, "va-1 attached", () => {
      if (!server.find(VOLUME_ATTACHMENTS, "va-1")) server.create(VOLUME_ATTACHMENTS, va("va-1"));
      return attached(server, "va-1");
    });
    assert.equal(holder(server), "replica-a");

    // SIGTERM: a finishes, releases the lease, and b takes over within about one retry period.
    const termStatus = await a.stop("SIGTERM");
    assert.equal(termStatus.code, 0, a.log);
    assert.match(a.log, /Released lease/);
    const handover = await until(server, "replica-b to lead", () => holder(server) === "replica-b");
    // Without the release b would wait until the lease expired: at least LEASE_MS - RETRY_MS
    // after a's last renewal. With it, b takes over at its next retry (plus process scheduling
    // on a loaded machine).
    assert.ok(handover < LEASE_MS - 2 * RETRY_MS, `SIGTERM hand-over took ${handover} ms`);
    server.create(VOLUME_ATTACHMENTS, va("va-2"));
    await until(server, "va-2 attached", () => attached(server, "va-2"));

    // SIGKILL: nothing is released; a new standby takes over once the lease expires.
    const c = new Replica("replica-c", kubeconfig);
    replicas.push(c);
    await until(
      server,
      "replica-c to observe the lease",
      () => c.log.includes("Attempting to acquire"),
    );
    await b.stop("SIGKILL");
    const takeover = await until(server, "replica-c to lead", () => holder(server) === "replica-c");
    assert.ok(
      takeover <= LEASE_MS + RETRY_MS * 1.2 + 2000,
      `SIGKILL take-over took ${takeover} ms`,
    );
    server.create(VOLUME_ATTACHMENTS, va("va-3"));
    await until(server, "va-3 attached", () => attached(server, "va-3"));

    const cStatus = await c.stop("SIGTERM");
    assert.equal(cStatus.code, 0, c.log);
    // Each VA was attached by the replica leading at the time, and standbys did nothing.
    assert.deepEqual(marked(a), ["va-1"]);
    assert.deepEqual(marked(b), ["va-2"]);
    assert.deepEqual(marked(c), ["va-3"]);
    for (const r of [a, b, c]) {
      assert.doesNotMatch(beforeLeading(r), /Marking as attached|Starting CSI attacher/, r.name);
    }
  } finally {
    for (const r of replicas) await r.stop("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
