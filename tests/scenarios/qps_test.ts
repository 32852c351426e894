/**
 * `--kube-api-qps` / `--kube-api-burst`: the main client's token bucket, measured on the clock
 * the bucket runs on.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { loadConnection } from "../../lib/kube/config.ts";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { TokenBucket } from "../../lib/workqueue/token_bucket.ts";

/** Waits (real time, event driven) until the server has seen `n` patches. */
async function patchesReach(server: MemoryApiServer, n: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (server.requests.filter((r) => r.verb === "patch").length < n) {
    if (Date.now() > deadline) throw new Error(`fewer than ${n} patches arrived`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

Deno.test("KubeClient with qps 5 and burst 10 spreads 50 writes over 8 s of bucket time", async () => {
  await using server = await MemoryApiServer.start();
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(`${dir}/kubeconfig`, server.kubeconfig());
  const clock = new FakeClock();
  const client = new KubeClient({
    connection: await loadConnection({ kubeconfigPath: `${dir}/kubeconfig` }),
    rateLimiter: new TokenBucket({ clock }, { qps: 5, burst: 10 }),
  }, {});
  try {
    server.create(VOLUME_ATTACHMENTS, {
      metadata: { name: "va" },
      spec: { attacher: "a", nodeName: "n", source: { persistentVolumeName: "p" } },
    });
    const writes = Array.from({ length: 50 }, (_, i) =>
      client.patch(VOLUME_ATTACHMENTS, "va", {
        type: "merge",
        body: { metadata: { annotations: { [`k${i}`]: "v" } } },
      }));
    for (let second = 0; second <= 8; second++) {
      const allowed = Math.min(50, 10 + 5 * second);
      await patchesReach(server, allowed);
      const seen = server.requests.filter((r) => r.verb === "patch").length;
      assert.equal(seen, allowed, `writes after ${second} s of bucket time`);
      clock.advance(1000);
    }
    await Promise.all(writes);
  } finally {
    await client.close();
    await Deno.remove(dir, { recursive: true });
  }
});
