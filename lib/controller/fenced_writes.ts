/**
 * The API view of a term's work: every write it makes carries the term's lease fence, reads go
 * through untouched. The client asks the fence after the write's wait for the rate limiter and
 * the transport right before its bytes are written, every retry included
 * (`ObjectOptions.fence` in `../kube/api.ts`); a refused write rejects with `FencedError`, which
 * {@link fencedIn} recognises. Built once per handler, so no write of the handler can go out
 * without the fence.
 *
 * @module
 */

import { FencedError, type LeaseFence } from "../lease_fence.ts";
import type {
  KubeApi,
  ListOptions,
  ObjectList,
  ObjectOptions,
  Patch,
  Resource,
  WatchEvent,
  WatchOptions,
} from "../kube/api.ts";
import type { KubeObject } from "../kube/types.ts";

/** `kube` with `fence` on every create, update, patch and delete. */
export class FencedWrites implements KubeApi {
  readonly #kube: KubeApi;
  readonly #fence: LeaseFence;

  constructor(kube: KubeApi, fence: LeaseFence) {
    this.#kube = kube;
    this.#fence = fence;
  }

  list<T extends KubeObject>(res: Resource, opts?: ListOptions): Promise<ObjectList<T>> {
    return this.#kube.list<T>(res, opts);
  }

  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    return this.#kube.watch<T>(res, opts);
  }

  get<T extends KubeObject>(res: Resource, name: string, opts?: ObjectOptions): Promise<T> {
    return this.#kube.get<T>(res, name, opts);
  }

  create<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T> {
    return this.#kube.create<T>(res, obj, { ...opts, fence: this.#fence });
  }

  update<T extends KubeObject>(res: Resource, obj: T, opts?: ObjectOptions): Promise<T> {
    return this.#kube.update<T>(res, obj, { ...opts, fence: this.#fence });
  }

  patch<T extends KubeObject>(
    res: Resource,
    name: string,
    patch: Patch,
    opts?: ObjectOptions & { subresource?: "status" },
  ): Promise<T> {
    return this.#kube.patch<T>(res, name, patch, { ...opts, fence: this.#fence });
  }

  delete(res: Resource, name: string, opts?: ObjectOptions): Promise<void> {
    return this.#kube.delete(res, name, { ...opts, fence: this.#fence });
  }
}

/** True when `err`, or an error it was made from (`cause`), is a fence's refusal. */
export function fencedIn(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof FencedError) return true;
  }
  return false;
}
