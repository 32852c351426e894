import assert from "node:assert/strict";
import {
  CANARY_DRIVER,
  CANARY_NODE,
  type CanaryApi,
  createCanaryNode,
  runControllerCanary,
} from "./controller_canary.ts";
import { controllerVaName, uniqueVolumeName } from "./kit.ts";
import { PATHS } from "./objects.ts";
import type { RawRequest, RawResponse } from "./raw_api.ts";

type Obj = {
  metadata: { name: string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

/** What the scripted kube-controller-manager does; each false is an informer that is not live. */
interface ControllerBehaviour {
  bind: boolean;
  attach: boolean;
  detach: boolean;
}

/**
 * An in-memory API for the canary's paths with a scripted kube-controller-manager that reacts
 * (as far as `behaviour` lets it) before each request is served.
 */
class ScriptedCluster implements CanaryApi {
  readonly objects = new Map<string, Obj>();
  readonly statusPatches: string[] = [];
  readonly #behaviour: ControllerBehaviour;
  readonly #vaName: string;

  constructor(behaviour: ControllerBehaviour, vaName: string) {
    this.#behaviour = behaviour;
    this.#vaName = vaName;
  }

  /** Paths of what exists besides the canary Node. */
  leftovers(): string[] {
    return [...this.objects.keys()].filter((p) => p !== `${PATHS.nodes}/${CANARY_NODE}`);
  }

  #react(): void {
    const pvc = [...this.objects.entries()].find(([p]) => p.includes("/persistentvolumeclaims/"));
    if (this.#behaviour.bind && pvc !== undefined) pvc[1].status = { phase: "Bound" };
    const podExists = [...this.objects.keys()].some((p) => p.includes("/pods/"));
    const vaPath = `${PATHS.volumeAttachments}/${this.#vaName}`;
    const va = this.objects.get(vaPath);
    const node = this.objects.get(`${PATHS.nodes}/${CANARY_NODE}`)!;
    const bound = pvc?.[1].status?.phase === "Bound";
    if (this.#behaviour.attach && podExists && bound && va === undefined) {
      this.objects.set(vaPath, { metadata: { name: this.#vaName }, spec: {} });
    }
    if (va?.status?.attached === true && podExists) {
      node.status = { volumesAttached: [{ name: uniqueVolumeName(CANARY_DRIVER, "canary-1") }] };
    }
    if (this.#behaviour.detach && !podExists && va !== undefined) {
      this.objects.delete(vaPath);
      node.status = { volumesAttached: [] };
    }
  }

  #answer(status: number, body: unknown): RawResponse {
    const text = JSON.stringify(body);
    return { status, contentType: "application/json", warning: "", text, json: body };
  }

  request(method: string, path: string, _req?: RawRequest): Promise<RawResponse> {
    this.#react();
    assert.equal(method, "DELETE");
    const existed = this.objects.delete(path);
    return Promise.resolve(this.#answer(existed ? 200 : 404, {}));
  }

  createOk<T>(path: string, obj: unknown): Promise<T> {
    this.#react();
    const o = structuredClone(obj) as Obj;
    const key = `${path}/${o.metadata.name}`;
    assert.ok(!this.objects.has(key), `${key} exists`);
    this.objects.set(key, o);
    return Promise.resolve(o as T);
  }

  find<T>(path: string): Promise<T | undefined> {
    this.#react();
    return Promise.resolve(this.objects.get(path) as T | undefined);
  }

  getOk<T>(path: string): Promise<T> {
    this.#react();
    const o = this.objects.get(path);
    if (o === undefined) return Promise.reject(new Error(`GET ${path}: 404`));
    return Promise.resolve(o as T);
  }

  patchOk<T>(path: string, _type: "merge" | "json", body: unknown): Promise<T> {
    this.#react();
    assert.ok(path.endsWith("/status"), path);
    const o = this.objects.get(path.slice(0, -"/status".length));
    assert.ok(o !== undefined, `${path}: no object`);
    this.statusPatches.push(path);
    o.status = { ...o.status, ...(body as Obj).status };
    return Promise.resolve(o as T);
  }

  deleteOk(path: string): Promise<void> {
    this.#react();
    this.objects.delete(path);
    return Promise.resolve();
  }
}

async function scripted(behaviour: ControllerBehaviour): Promise<ScriptedCluster> {
  const cluster = new ScriptedCluster(
    behaviour,
    await controllerVaName("canary-1", CANARY_DRIVER, CANARY_NODE),
  );
  await createCanaryNode(cluster);
  return cluster;
}

const healthy = () => Promise.resolve("ok");

Deno.test("the canary passes through bind, VA, attach and detach and leaves nothing", async () => {
  const cluster = await scripted({ bind: true, attach: true, detach: true });
  const times = await runControllerCanary(cluster, { seq: 1, healthz: healthy, intervalMs: 5 });
  const order = [times.healthz, times.bound, times.vaCreated, times.attached, times.detached];
  assert.deepEqual(order, [...order].sort((a, b) => a - b));
  // The suite played the canary driver's attacher on the controller's VolumeAttachment.
  const va = await controllerVaName("canary-1", CANARY_DRIVER, CANARY_NODE);
  assert.deepEqual(cluster.statusPatches, [`${PATHS.volumeAttachments}/${va}/status`]);
  assert.deepEqual(cluster.leftovers(), []);
});

Deno.test("the canary names the step kube-controller-manager did not take, and cleans up", async (t) => {
  const cases: [string, ControllerBehaviour, RegExp][] = [
    [
      "no binding",
      { bind: false, attach: true, detach: true },
      /the PV binder binding PVC e2e-canary-1 did not happen within 0.2 s \(last: phase undefined\)/,
    ],
    [
      "no VolumeAttachment",
      { bind: true, attach: false, detach: true },
      /the attach\/detach controller creating VolumeAttachment csi-[0-9a-f]{64} for Pod e2e-canary-1/,
    ],
    [
      "no detach",
      { bind: true, attach: true, detach: false },
      /deleting VolumeAttachment csi-[0-9a-f]{64} after Pod e2e-canary-1 went .*the VolumeAttachment exists/,
    ],
  ];
  for (const [name, behaviour, message] of cases) {
    await t.step(name, async () => {
      const cluster = await scripted(behaviour);
      const err = await runControllerCanary(cluster, {
        seq: 1,
        healthz: healthy,
        timeoutMs: 200,
        intervalMs: 5,
        logPath: "/x/kcm.log",
      }).then(() => undefined, (e: Error) => e);
      assert.ok(err instanceof Error, "rejected");
      assert.match(err.message, /^kube-controller-manager is not working: /);
      assert.match(err.message, message);
      assert.match(err.message, /backing off after kube-apiserver restarts, see \/x\/kcm\.log$/);
      assert.deepEqual(cluster.leftovers(), []);
    });
  }
});

Deno.test("the canary fails on a kube-controller-manager that does not answer /healthz", async () => {
  const cluster = await scripted({ bind: true, attach: true, detach: true });
  const err = await runControllerCanary(cluster, {
    seq: 1,
    healthz: () => Promise.reject(new Error("kube-controller-manager exited (1)")),
    timeoutMs: 100,
    intervalMs: 5,
  }).then(() => undefined, (e: Error) => e);
  assert.ok(err instanceof Error);
  assert.match(err.message, /\/healthz answering ok did not happen .*exited \(1\)/);
  assert.deepEqual(cluster.leftovers(), [], "nothing was created");
});
