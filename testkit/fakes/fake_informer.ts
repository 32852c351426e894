/**
 * An informer whose cache the test fills and whose events the test fires by hand, as the Go
 * attacher's unit-test framework does. Patches made by the controller do not reach it, so a retry
 * starts again from the object as the test left it (external-attacher `pkg/controller/framework_test.go`).
 *
 * @module
 */

import type { InformerLike } from "../../lib/controller/controller.ts";
import type { EventHandlers } from "../../lib/kube/store.ts";
import type { InformerSource, InformerSpec } from "../../lib/controller/build.ts";
import type {
  CsiNode,
  KubeObject,
  PersistentVolume,
  VolumeAttachment,
} from "../../lib/kube/types.ts";

/** A hand-driven informer. */
export class FakeInformer<T extends KubeObject> implements InformerLike<T> {
  #objects = new Map<string, T>();
  #handlers: EventHandlers<T>[] = [];
  #transform: (obj: T) => T;

  /**
   * @param transform applied to a copy of every object entering the cache, as the informer's
   *   `transform` option is (e.g. `CacheFields.volumeAttachment`); none by default.
   */
  constructor(objects: T[] = [], transform?: (obj: T) => T) {
    this.#transform = transform === undefined
      ? (obj) => obj
      : (obj) => transform(structuredClone(obj));
    for (const obj of objects) this.#objects.set(obj.metadata.name, this.#transform(obj));
  }

  get(name: string): T | undefined {
    return this.#objects.get(name);
  }

  list(): T[] {
    return [...this.#objects.values()];
  }

  addHandlers(h: EventHandlers<T>): void {
    this.#handlers.push(h);
  }

  hasSynced(): boolean {
    return true;
  }

  waitForSync(_signal: AbortSignal): Promise<void> {
    return Promise.resolve();
  }

  /** Runs as an informer does, until `signal` aborts; the test delivers every event. */
  run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) =>
      signal.addEventListener("abort", () => resolve(), { once: true })
    );
  }

  /** Puts `obj` in the cache without an event. */
  set(obj: T): void {
    this.#objects.set(obj.metadata.name, this.#transform(obj));
  }

  /** Puts `obj` in the cache and fires `add`. */
  emitAdd(obj: T): void {
    const cached = this.#transform(obj);
    this.#objects.set(cached.metadata.name, cached);
    for (const h of this.#handlers) h.add?.(cached);
  }

  /** Puts `newObj` in the cache and fires `update(oldObj, newObj)`. */
  emitUpdate(oldObj: T, newObj: T): void {
    const cached = this.#transform(newObj);
    this.#objects.set(cached.metadata.name, cached);
    for (const h of this.#handlers) h.update?.(oldObj, cached);
  }

  /** Removes `obj` from the cache and fires `delete`. */
  emitDelete(obj: T): void {
    this.#objects.delete(obj.metadata.name);
    for (const h of this.#handlers) h.delete?.(obj);
  }
}

/** The kind of the objects each of the controller's informers caches, by resource. */
const KIND_OF: Readonly<Record<string, string>> = {
  volumeattachments: "VolumeAttachment",
  persistentvolumes: "PersistentVolume",
  csinodes: "CSINode",
};

/**
 * The controller's informers as hand-driven caches: the controller builder makes each through
 * {@link FakeInformers.source} (with the shipped transforms), holding the seeds of its kind,
 * which enter it as it is made.
 */
export class FakeInformers {
  readonly #seeds: readonly KubeObject[];
  readonly #made = new Map<string, FakeInformer<KubeObject>>();

  constructor(seeds: readonly KubeObject[] = []) {
    this.#seeds = seeds;
  }

  /** What the builder makes its informers with. */
  readonly source: InformerSource = <T extends KubeObject>(spec: InformerSpec<T>) => {
    const kind = KIND_OF[spec.resource.plural];
    const seeds = this.#seeds.filter((obj) => obj.kind === kind) as T[];
    const informer = new FakeInformer<T>(seeds, spec.transform);
    this.#made.set(spec.resource.plural, informer as unknown as FakeInformer<KubeObject>);
    return informer;
  };

  get volumeAttachments(): FakeInformer<VolumeAttachment> {
    return this.#get("volumeattachments");
  }

  get persistentVolumes(): FakeInformer<PersistentVolume> {
    return this.#get("persistentvolumes");
  }

  get csiNodes(): FakeInformer<CsiNode> {
    return this.#get("csinodes");
  }

  #get<T extends KubeObject>(plural: string): FakeInformer<T> {
    const informer = this.#made.get(plural);
    if (informer === undefined) throw new Error(`no ${plural} informer was made`);
    return informer as unknown as FakeInformer<T>;
  }
}
