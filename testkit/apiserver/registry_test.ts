import assert from "node:assert/strict";
import { Registry } from "./registry.ts";
import { resolveServedResource } from "./resources.ts";
import { FakeClock } from "../fakes/fake_clock.ts";

Deno.test("Registry.eventsAfter() gives the wanted events after a resourceVersion, in order", () => {
  const registry = new Registry({ clock: new FakeClock(0) }, {
    historyLimit: Infinity,
    initialResourceVersion: 100,
  });
  const csiNodes = resolveServedResource("csinodes");
  const pvs = resolveServedResource("persistentvolumes");
  const rvs: Record<string, number> = {};
  for (let i = 0; i < 50; i++) {
    const res = i % 10 === 0 ? csiNodes : pvs;
    const obj = registry.create(res, "", {
      apiVersion: res === csiNodes ? "storage.k8s.io/v1" : "v1",
      kind: res === csiNodes ? "CSINode" : "PersistentVolume",
      metadata: { name: `o${i}` },
      spec: {},
    }, { seed: true });
    rvs[`o${i}`] = Number(obj.metadata.resourceVersion);
  }
  const all = registry.eventsAfter(rvs.o24!);
  assert.deepEqual(all.map((ev) => ev.object.metadata.name), [
    ...Array.from({ length: 25 }, (_, k) => `o${25 + k}`),
  ]);
  const nodes = registry.eventsAfter(rvs.o9!, (ev) => ev.resource === csiNodes);
  assert.deepEqual(nodes.map((ev) => ev.object.metadata.name), ["o10", "o20", "o30", "o40"]);
  assert.deepEqual(registry.eventsAfter(rvs.o49!), []);
  assert.equal(registry.eventsAfter(0).length, 50);
  // A copy: changing it changes nothing stored.
  nodes[0]!.object.metadata.name = "changed";
  assert.equal(registry.eventsAfter(rvs.o9!)[0]!.object.metadata.name, "o10");
});
