/**
 * The program as users run it: `main.ts` in a child process, in dummy mode, against the fake API
 * server over HTTP.
 */

import assert from "node:assert/strict";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { VolumeAttachment } from "../../lib/kube/types.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

function vaFor(name: string, attacher: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher, nodeName: "node1", source: { persistentVolumeName: `pv-${name}` } },
    status: { attached: false },
  };
}

/** Resolves when `pred` holds for the server's VA `name`, checked on every change. */
function whenVA(
  server: MemoryApiServer,
  name: string,
  pred: (va: VolumeAttachment | undefined) => boolean,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pred(server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, name))) {
        clearTimeout(timer);
        unsubscribe();
        resolve();
      }
    };
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`VolumeAttachment ${name} did not reach the expected state`));
    }, timeoutMs);
    const unsubscribe = server.onEvent(check);
    check();
  });
}

Deno.test("main.ts --dummy marks csi/dummy VolumeAttachments attached and leaves others alone", async () => {
  await using server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir({ prefix: "attacher-dummy-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(kubeconfig, server.kubeconfig());
  server.create(VOLUME_ATTACHMENTS, vaFor("mine", "csi/dummy"));
  server.create(VOLUME_ATTACHMENTS, vaFor("theirs", "other.csi.example.com"));

  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, "--dummy", `--kubeconfig=${kubeconfig}`, "--v=4"],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ]);
  try {
    await whenVA(server, "mine", (va) => va?.status?.attached === true, 60_000);
  } finally {
    child.kill("SIGTERM");
  }
  const status = await child.status;
  const [, stderr] = await output;
  await Deno.remove(dir, { recursive: true });

  assert.equal(status.code, 0, `exit status; log:\n${stderr}`);
  assert.equal(server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "mine").status?.attached, true);
  const theirs = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "theirs");
  assert.equal(theirs.status?.attached, false);
  assert.equal(theirs.metadata.finalizers, undefined);
  const writesToTheirs = server.requests.filter((r) =>
    r.name === "theirs" && r.verb !== "get" && r.verb !== "list" && r.verb !== "watch"
  );
  assert.deepEqual(writesToTheirs, []);
  const mine = server.requests.filter((r) => r.name === "mine" && r.verb === "patch");
  assert.equal(mine.length, 1, "one status patch for the dummy VA");
  assert.equal(mine[0]!.subresource, "status");
  // The write carries the VA's uid, so it cannot mark a VA created again under the name.
  const uid = server.get<VolumeAttachment>(VOLUME_ATTACHMENTS, "mine").metadata.uid;
  assert.ok(uid);
  assert.deepEqual(mine[0]!.body, { status: { attached: true }, metadata: { uid } });
  assert.match(stderr, /Running in dummy mode/);
});
