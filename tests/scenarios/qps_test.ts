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
import { ThrottledLogger, WAITED_MESSAGE } from "../../lib/kube/request/throttle_log.ts";
import { createMetrics } from "../../lib/observe/metrics.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";
import { plainConnection } from "../../testkit/harness/client_fixtures.ts";

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

/**
 * Four PATCHes at once through a client at qps 1 and burst 1 with a logger at `verbosity`:
 * they wait 0, 1, 2 and 3 s of bucket time. The lines logged, the waits and request durations
 * reported, and the metrics they make.
 */
async function throttledWrites(verbosity: number) {
  await using server = await MemoryApiServer.start();
  const clock = new FakeClock();
  const log = new FakeLogger(verbosity);
  const metrics = createMetrics({});
  const waits: number[] = [];
  const durations: number[] = [];
  const client = new KubeClient({
    connection: plainConnection(server.url),
    clock,
    log,
    rateLimiter: new TokenBucket({ clock }, { qps: 1, burst: 1 }),
    throttledLogger: new ThrottledLogger(clock),
    observer: {
      observeApiRequest: (info) => metrics.observeApiRequest(info),
      observeApiRetry: (info) => metrics.observeApiRetry(info),
      observeRateLimiterWait: (info) => {
        waits.push(info.seconds);
        metrics.observeRateLimiterWait(info);
      },
      observeApiRequestDuration: (info) => {
        durations.push(info.seconds);
        metrics.observeApiRequestDuration(info);
      },
    },
  });
  try {
    server.create(VOLUME_ATTACHMENTS, {
      metadata: { name: "va" },
      spec: { attacher: "a", nodeName: "n", source: { persistentVolumeName: "p" } },
    });
    const writes = Array.from({ length: 4 }, (_, i) =>
      client.patch(VOLUME_ATTACHMENTS, "va", {
        type: "merge",
        body: { metadata: { annotations: { [`k${i}`]: "v" } } },
      }));
    for (let second = 0; second < 4; second++) {
      await patchesReach(server, second + 1);
      clock.advance(1000);
    }
    await Promise.all(writes);
  } finally {
    await client.close();
  }
  const host = new URL(server.url).host;
  return { log, waits, durations, text: await metrics.metricsText(), host, url: server.url };
}

Deno.test("KubeClient logs its waits for the rate limiter as client-go v0.37 does, at V(3) and throttled at V(2)", async () => {
  const { log, waits, durations, url } = await throttledWrites(3);
  assert.deepEqual(waits, [0, 1, 2, 3]);
  assert.equal(durations.length, 4);
  for (const [i, seconds] of durations.toSorted().entries()) {
    assert.ok(seconds >= i, "each request's duration includes its wait");
  }
  const lines = log.withMessage(WAITED_MESSAGE);
  const fields = (delay: string) => ({
    delay,
    reason: "client-side throttling, not priority and fairness",
    verb: "PATCH",
    URL: `${url}/apis/storage.k8s.io/v1/volumeattachments/va`,
  });
  assert.deepEqual(lines.map((l) => [l.v, l.fields]), [
    [3, fields("1s")],
    [3, fields("2s")],
    [2, fields("2s")],
    [3, fields("3s")],
    [2, fields("3s")],
  ]);
});

Deno.test("KubeClient logs a wait over 1 s at --v=0 at most once every 10 s", async () => {
  const { log } = await throttledWrites(0);
  const lines = log.withMessage(WAITED_MESSAGE);
  assert.deepEqual(lines.map((l) => [l.v, l.fields.delay]), [[0, "2s"]], "3s came 1 s later");
});

Deno.test("KubeClient's waits and request durations make client-go's rest_client histograms", async () => {
  const { text, host } = await throttledWrites(0);
  const bucket = (name: string, le: string) =>
    new RegExp(
      `^${name}_bucket\\{host="${host}",verb="PATCH",le="${le.replace("+", "\\+")}"\\} (\\d+)$`,
      "m",
    )
      .exec(text)?.[1];
  const limiter = "rest_client_rate_limiter_duration_seconds";
  assert.match(
    text,
    /# HELP rest_client_rate_limiter_duration_seconds \[ALPHA\] Client side rate limiter latency in seconds\. Broken down by verb, and host\./,
  );
  assert.equal(bucket(limiter, "0.005"), "1", "the first write did not wait");
  assert.equal(bucket(limiter, "1"), "2");
  assert.equal(bucket(limiter, "2"), "3");
  assert.equal(bucket(limiter, "4"), "4");
  assert.equal(bucket(limiter, "+Inf"), "4");
  const duration = "rest_client_request_duration_seconds";
  assert.match(
    text,
    /# HELP rest_client_request_duration_seconds \[ALPHA\] Request latency in seconds\. Broken down by verb, and host\./,
  );
  assert.equal(bucket(duration, "+Inf"), "4");
  assert.equal(bucket(duration, "60"), "4");
});
