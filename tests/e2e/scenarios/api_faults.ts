/**
 * Scenarios 8 and 9: the API client against a real kube-apiserver that misbehaves.
 *
 * 8. Every connection of the attacher goes silent (a loopback TCP proxy stops forwarding without
 *    closing, as a vanished API server node or a load balancer failover does); a VA created
 *    afterwards must be attached within 45 s (client-go notices in about 45 s).
 * 9. kube-apiserver runs with a max-in-flight limit of 1 (priority and fairness off), so it
 *    answers concurrent requests `429` with `Retry-After: 1`; every VA must attach without a
 *    single `attachError` write, the throttling being absorbed by the client's retries.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { VolumeAttachment } from "../../../lib/kube/types.ts";
import { TcpProxy } from "../../../testkit/tcp_proxy.ts";
import type { ScenarioContext } from "../context.ts";
import { waitForLog } from "../kit.ts";
import { PATHS } from "../objects.ts";
import { READY_LINE } from "./round_trip.ts";

/** The goal for noticing dead connections: client-go's HTTP/2 health check (30 s + 15 s). */
export const SILENT_GOAL_SECONDS = 45;

/** Scenario 8; returns the seconds from "all connections silent" to the new VA attached. */
export async function silentConnections(ctx: ScenarioContext): Promise<number> {
  const { kit } = ctx;
  const server = new URL(kit.api.server);
  await using proxy = await TcpProxy.start({
    hostname: server.hostname,
    port: Number(server.port),
  });
  const kubeconfig = `${ctx.cluster.info.dir}/attacher-proxied.kubeconfig`;
  const original = await Deno.readTextFile(ctx.cluster.info.attacherKubeconfig);
  assert.ok(original.includes(server.origin), "the attacher's kubeconfig names the server");
  await Deno.writeTextFile(
    kubeconfig,
    original.replaceAll(server.origin, `https://127.0.0.1:${proxy.port}`),
  );
  const attacher = ctx.startAttacher("a", { kubeconfig });
  await waitForLog(attacher, READY_LINE);
  const node = ctx.nodes[0]!;
  const before = await kit.makeVolume("vol0");
  const first = await kit.createVa("va0", node, before.pv);
  await kit.waitAttached(first);

  proxy.silenceExisting();
  const silencedAt = performance.now();
  const silenced = proxy.open;
  const after = await kit.makeVolume("vol1");
  const va = await kit.createVa("va1", node, after.pv);
  await kit.waitAllAttached([va], 120_000);
  const seconds = (performance.now() - silencedAt) / 1000;
  console.log(
    `    new VA attached ${seconds.toFixed(1)} s after the attacher's ${silenced} connection(s) ` +
      `went silent (goal <= ${SILENT_GOAL_SECONDS} s); ${proxy.accepted} connection(s) in all`,
  );
  assert.equal(attacher.exitStatus, undefined, "the attacher keeps running");
  assert.ok(
    seconds <= SILENT_GOAL_SECONDS,
    `attached ${seconds.toFixed(1)} s after the connections went silent`,
  );
  assert.ok(await kit.publishedOnDriver(after.volumeId, ctx.nodeId));
  // Detach while the proxy still forwards: the attacher reaches the server only through it.
  await kit.deleteVas([first, va]);
  return seconds;
}

/** kube-apiserver flags that make it answer concurrent requests with 429 + `Retry-After: 1`. */
export const THROTTLING_FLAGS = [
  "--enable-priority-and-fairness=false",
  "--max-mutating-requests-inflight=1",
  "--max-requests-inflight=1",
];

/** What scenario 9 measured. */
export interface ThrottlingFigures {
  attaches: number;
  /** Requests of the attacher (every try, watches excluded) while the VAs attached. */
  requests: number;
  /** Of those, answered 429. */
  throttled: number;
  /** `attachError` values written to any VA. */
  attachErrors: number;
}

/** Scenario 9. */
export async function throttledApiServer(
  ctx: ScenarioContext,
  count = 30,
): Promise<ThrottlingFigures> {
  const { kit } = ctx;
  await ctx.cluster.restartApiServer(0, THROTTLING_FLAGS);
  try {
    const attacher = ctx.startAttacher("a", {
      // Let the requests of the default 10 workers race: the default 5 QPS would space them out.
      // (With more workers than retries, a herd that retries in step after `Retry-After: 1` gets
      // one request through per second, and its last members can run out of their 10 retries,
      // with client-go as with us: 20 workers gave 4 attachError writes in one run.)
      args: ["--kube-api-qps=200", "--kube-api-burst=400"],
    });
    await waitForLog(attacher, READY_LINE);
    const volumes = [];
    for (let i = 0; i < count; i++) volumes.push(await kit.makeVolume(`vol${i}`));

    // Every status the VAs go through, from a watch of the admin (not throttled: system:masters).
    const errors: string[] = [];
    const stop = new AbortController();
    const watching = watchAttachErrors(ctx, stop.signal, errors);
    const startedAt = new Date();
    const vas = await Promise.all(
      volumes.map((v, i) => kit.createVa(`va${i}`, ctx.nodes[i % ctx.nodes.length]!, v.pv)),
    );
    await kit.waitAllAttached(vas, 180_000);
    stop.abort();
    await watching;
    assert.equal(attacher.exitStatus, undefined, "the attacher keeps running");

    const events = (await ctx.cluster.auditEvents()).filter((e) =>
      e.stage === "ResponseComplete" && e.verb !== "watch" &&
      new Date(e.requestReceivedTimestamp ?? 0) >= startedAt
    );
    const figures: ThrottlingFigures = {
      attaches: vas.length,
      requests: events.length,
      throttled: events.filter((e) => e.responseStatus?.code === 429).length,
      attachErrors: errors.length,
    };
    console.log(
      `    ${figures.attaches} attaches under a max-in-flight limit of 1: ${figures.requests} ` +
        `requests (${(figures.requests / figures.attaches).toFixed(2)} per attach), ` +
        `${figures.throttled} answered 429, ${figures.attachErrors} attachError write(s)`,
    );
    assert.ok(figures.throttled > 0, "the server throttled the attacher (else nothing was tested)");
    assert.deepEqual(errors, [], "no attachError was written for throttling");
    return figures;
  } finally {
    await ctx.cluster.restartApiServer();
  }
}

/** Records every `attachError` message a VA of this scenario shows, until `signal` aborts. */
async function watchAttachErrors(
  ctx: ScenarioContext,
  signal: AbortSignal,
  errors: string[],
): Promise<void> {
  const prefix = `${ctx.kit.prefix}-`;
  const res = await ctx.kit.api.stream(
    `${PATHS.volumeAttachments}?watch=true&allowWatchBookmarks=false`,
    signal,
  );
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for await (const chunk of res.body!) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (line === "") continue;
        const ev = JSON.parse(line) as { object?: VolumeAttachment };
        const va = ev.object;
        const message = va?.status?.attachError?.message;
        if (va?.metadata?.name?.startsWith(prefix) && message) {
          errors.push(`${va.metadata.name}: ${message}`);
        }
      }
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}
