/**
 * The benchmark's CSI driver in its own process: the in-memory {@link ExampleDriver} with the
 * run's volumes, counting every gRPC call by method on the driver side. With the spec's
 * `unpublishDelayMs` (the detach flood) every ControllerUnpublishVolume takes that long.
 *
 * Usage: `deno run -A bench/fake_driver_process.ts '<FixtureSpec JSON>' <socket>`. Once it serves
 * it prints one JSON line `{"control": "http://127.0.0.1:<port>"}`; that control server answers
 * `GET /calls` (counts by method since the last reset) and `POST /calls/reset` (the same, then
 * zero). It runs until killed.
 *
 * @module
 */

import { ExampleDriver } from "../testkit/csi/example_driver.ts";
import type { ControllerHandlers, IdentityHandlers } from "../testkit/csi/server.ts";
import { startCsiDriverServer } from "../testkit/csi/server.ts";
import {
  CANARY,
  type FixtureSpec,
  FLOOD_PROBE,
  hasProbe,
  PROBE_PUBLISHES,
  volumeId,
} from "./fixtures.ts";

/** gRPC method names by handler name, as the CSI spec names them. */
const METHOD_NAMES: Readonly<Record<string, string>> = {
  getPluginInfo: "GetPluginInfo",
  getPluginCapabilities: "GetPluginCapabilities",
  probe: "Probe",
  controllerPublishVolume: "ControllerPublishVolume",
  controllerUnpublishVolume: "ControllerUnpublishVolume",
  listVolumes: "ListVolumes",
  controllerGetCapabilities: "ControllerGetCapabilities",
};

/** Wraps every handler of `handlers` so that each call adds one to `counts[<gRPC method>]`. */
export function countCalls<T extends object>(handlers: T, counts: Map<string, number>): T {
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(handlers)) {
    if (typeof fn !== "function") continue;
    const method = METHOD_NAMES[name] ?? name;
    out[name] = (request: unknown) => {
      counts.set(method, (counts.get(method) ?? 0) + 1);
      return fn(request);
    };
  }
  return out as T;
}

async function main(specJson: string, socket: string): Promise<void> {
  const spec = JSON.parse(specJson) as FixtureSpec;
  const driver = new ExampleDriver({}, { name: spec.driver });
  driver.createVolume(volumeId(spec, CANARY));
  for (let i = 0; i < spec.count; i++) driver.createVolume(volumeId(spec, i));
  const controller = driver.controllerHandlers();
  if (hasProbe(spec)) driver.createVolume(volumeId(spec, FLOOD_PROBE));
  const delayMs = spec.unpublishDelayMs;
  if (delayMs !== undefined) {
    const unpublish = controller.controllerUnpublishVolume?.bind(controller);
    if (unpublish === undefined) throw new Error("the example driver has no unpublish");
    controller.controllerUnpublishVolume = async (request) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return await unpublish(request);
    };
  }
  const counts = new Map<string, number>();
  if (spec.takeover === true) {
    // The takeover counts the probe's publishes apart from those of VAs already attached.
    const publish = controller.controllerPublishVolume?.bind(controller);
    if (publish === undefined) throw new Error("the example driver has no publish");
    const probe = volumeId(spec, FLOOD_PROBE);
    controller.controllerPublishVolume = (request) => {
      if (request.volumeId === probe) {
        counts.set(PROBE_PUBLISHES, (counts.get(PROBE_PUBLISHES) ?? 0) + 1);
      }
      return publish(request);
    };
  }
  await startCsiDriverServer({
    address: socket,
    identity: countCalls<IdentityHandlers>(driver.identityHandlers(), counts),
    controller: countCalls<ControllerHandlers>(controller, counts),
  });
  const snapshot = () => Object.fromEntries([...counts].sort(([a], [b]) => a.localeCompare(b)));
  const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === "GET" && path === "/calls") return Response.json(snapshot());
    if (req.method === "POST" && path === "/calls/reset") {
      const out = snapshot();
      counts.clear();
      return Response.json(out);
    }
    return new Response("not found\n", { status: 404 });
  });
  console.log(JSON.stringify({ control: `http://127.0.0.1:${control.addr.port}` }));
}

if (import.meta.main) {
  const [spec, socket] = Deno.args;
  if (spec === undefined || socket === undefined) {
    console.error("usage: fake_driver_process.ts '<fixture spec JSON>' <socket>");
    Deno.exit(2);
  }
  await main(spec, socket);
}
