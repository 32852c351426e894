/**
 * The benchmark's API server in its own process: a {@link MemoryApiServer} seeded with the run's
 * CSINodes and PersistentVolumes, plus a control server through which the benchmark creates and
 * deletes the VolumeAttachments (directly in storage, so the benchmark's own writes never show up
 * among the recorded requests) and reads the timeline and the request counts.
 *
 * Usage: `deno run -A bench/fake_apiserver_process.ts '<FixtureSpec JSON>'`. Prints one JSON line
 * `{"url": "http://127.0.0.1:<api port>", "control": "http://127.0.0.1:<control port>"}` once both
 * listen, then runs until killed. Control API (all JSON):
 * - `GET /kubeconfig`: a kubeconfig for the API server (text).
 * - `POST /canary`: creates the canary VolumeAttachment.
 * - `POST /attach`: creates all measured VolumeAttachments at once.
 * - `POST /detach`: deletes them all at once.
 * - `POST /flood`: creates the detach flood's probe VolumeAttachment (its PV exists when the spec
 *   has `unpublishDelayMs`).
 * - `GET /wait?for=canary|attached|gone|flood&timeoutMs=N`: resolves when the canary is attached,
 *   every measured VA is attached, every one is gone, or the flood probe is attached (or at the
 *   timeout) with a
 *   {@link import("./timeline.ts").WaitAnswer}.
 * - `POST /requests/take`: the requests received since the last take, counted, then forgotten
 *   ({@link import("./request_counts.ts").RequestCounts}).
 * - `GET /leases`: every change of a Lease's holder
 *   ({@link import("./environment.ts").LeaseHolderChange}), oldest first.
 * - `GET /watchlists`: every watch list written to its end
 *   ({@link import("./environment.ts").WatchListSent}), oldest first.
 * - `GET /timeline`: the per-object latencies ({@link import("./timeline.ts").TimelineReport}).
 *
 * Times are Unix epoch milliseconds from `performance.timeOrigin + performance.now()`, taken in
 * this process when the change is stored: the API server's own view of create, attach and gone.
 *
 * @module
 */

import { CSI_NODES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../lib/kube/api.ts";
import { MemoryApiServer, type RecordedRequest } from "../testkit/apiserver/server.ts";
import type { VolumeAttachment } from "../lib/kube/types.ts";
import {
  CANARY,
  csiNode,
  type FixtureSpec,
  FLOOD_PROBE,
  hasProbe,
  persistentVolume,
  vaName,
  volumeAttachment,
} from "./fixtures.ts";
import { bump, emptyCounts, type RequestCounts, requestKey } from "./request_counts.ts";
import { nowMs, Timeline, type WaitTarget } from "./timeline.ts";
import type { LeaseHolderChange, WatchListSent } from "./environment.ts";

/**
 * Counts recorded requests by verb and resource, content type, Accept, User-Agent and the media
 * type answered.
 */
export function countRequests(requests: readonly RecordedRequest[]): RequestCounts {
  const out = emptyCounts();
  for (const r of requests) {
    bump(
      out.byKey,
      r.verb === "" ? `${r.method} ${r.path}` : requestKey(r.verb, r.resource, r.subresource),
    );
    if (r.contentType !== "") bump(out.contentTypes, `${r.method} ${r.contentType}`);
    bump(out.accept, r.accept);
    bump(out.userAgents, r.userAgent);
    if (r.responseType !== "") {
      bump(out.responseTypes, `${r.userAgent.split("/")[0]} ${r.responseType}`);
    }
  }
  return out;
}

/** JSON numbers cannot be NaN: send null, which the reader turns back into NaN. */
function json(value: unknown): Response {
  return new Response(
    JSON.stringify(value, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v)),
    { headers: { "content-type": "application/json" } },
  );
}

async function main(specJson: string): Promise<void> {
  const spec = JSON.parse(specJson) as FixtureSpec;
  // The default history: every event until the periodic compaction, as etcd keeps it.
  const server = await MemoryApiServer.start();
  for (let n = 0; n < spec.nodes; n++) server.create(CSI_NODES, csiNode(spec, n));
  server.create(PERSISTENT_VOLUMES, persistentVolume(spec, CANARY));
  for (let i = 0; i < spec.count; i++) server.create(PERSISTENT_VOLUMES, persistentVolume(spec, i));
  if (hasProbe(spec)) server.create(PERSISTENT_VOLUMES, persistentVolume(spec, FLOOD_PROBE));
  server.clearRequests();

  const timeline = new Timeline({}, { spec });
  // Every change of a Lease's holder, as the API server stored it.
  const leaseHolders: LeaseHolderChange[] = [];
  server.onEvent((ev) => {
    if (ev.resource === "volumeattachments") {
      timeline.observe(ev.type, ev.object as VolumeAttachment);
    } else if (ev.resource === "leases") {
      const holder = (ev.object as { spec?: { holderIdentity?: string } }).spec?.holderIdentity ??
        "";
      const last = leaseHolders.findLast((c) => c.lease === ev.name);
      if (last?.holder !== holder) leaseHolders.push({ lease: ev.name, holder, at: nowMs() });
    }
  });

  // When each watch list was written to its end (the body is pulled as the client reads).
  const watchListsSent: WatchListSent[] = [];
  server.onWatchListSent((resource) => watchListsSent.push({ resource, at: nowMs() }));

  const handle = async (req: Request): Promise<Response> => {
    const url = new URL(req.url);
    switch (`${req.method} ${url.pathname}`) {
      case "GET /kubeconfig":
        return new Response(server.kubeconfig());
      case "POST /canary":
        server.create(VOLUME_ATTACHMENTS, volumeAttachment(spec, CANARY));
        return json({});
      case "POST /attach":
        timeline.attachStarted();
        for (let i = 0; i < spec.count; i++) {
          server.create(VOLUME_ATTACHMENTS, volumeAttachment(spec, i));
        }
        return json({});
      case "POST /detach":
        timeline.detachStarted();
        for (let i = 0; i < spec.count; i++) server.delete(VOLUME_ATTACHMENTS, vaName(spec, i));
        return json({});
      case "POST /flood":
        server.create(VOLUME_ATTACHMENTS, volumeAttachment(spec, FLOOD_PROBE));
        return json({});
      case "GET /wait": {
        const target = url.searchParams.get("for");
        if (
          target !== "canary" && target !== "attached" && target !== "gone" && target !== "flood"
        ) {
          return new Response("unknown wait target\n", { status: 400 });
        }
        const timeoutMs = Number(url.searchParams.get("timeoutMs") ?? "60000");
        return json(await timeline.wait(target satisfies WaitTarget, timeoutMs));
      }
      case "POST /requests/take": {
        const counts = countRequests(server.requests);
        server.clearRequests();
        return json(counts);
      }
      case "GET /timeline":
        return json(timeline.report());
      case "GET /leases":
        return json(leaseHolders);
      case "GET /watchlists":
        return json(watchListsSent);
      default:
        return new Response("not found\n", { status: 404 });
    }
  };
  const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handle);
  console.log(
    JSON.stringify({ url: server.url, control: `http://127.0.0.1:${control.addr.port}` }),
  );
}

if (import.meta.main) {
  const [spec] = Deno.args;
  if (spec === undefined) {
    console.error("usage: fake_apiserver_process.ts '<fixture spec JSON>'");
    Deno.exit(2);
  }
  await main(spec);
}
