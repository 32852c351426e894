/**
 * A read-only mirror of a {@link MemoryApiServer}'s objects, kept from its change feed, so that
 * the invariant checks (which run after every step) read the server's state without copying it.
 *
 * Every object in the mirror is deep-frozen and shared with the watch events the simulated API
 * sends: an attacher that modified an object it received from an informer (which the informer
 * contract forbids) fails with a TypeError instead of silently corrupting the "server".
 *
 * @module
 */

import type { ApiServerEvent, MemoryApiServer } from "../../testkit/apiserver/server.ts";
import type { KubeObject } from "../../lib/kube/types.ts";

/** One change, with its object frozen. */
export interface MirrorEvent {
  type: ApiServerEvent["type"];
  /** Plural resource name. */
  resource: string;
  namespace: string;
  name: string;
  resourceVersion: number;
  /** The object after the change (DELETED: its last state). Frozen. */
  object: KubeObject;
}

/** Freezes `value` and everything it holds. */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

/** The objects of a server by resource, namespace and name; updated synchronously. */
export class ServerMirror {
  #objects = new Map<string, Map<string, KubeObject>>();
  #listeners: Array<(ev: MirrorEvent) => void> = [];
  #unsubscribe: () => void;

  /** Follows `server` from now on, starting with what it holds. */
  constructor(server: MemoryApiServer, resources: readonly string[]) {
    for (const res of resources) {
      const map = new Map<string, KubeObject>();
      for (const obj of server.list(res).items) map.set(keyOf(obj), deepFreeze(obj));
      this.#objects.set(res, map);
    }
    this.#unsubscribe = server.onEvent((ev) => this.#apply(ev));
  }

  /** Stops following the server. */
  dispose(): void {
    this.#unsubscribe();
  }

  /** Calls `fn` synchronously after each change has been applied to the mirror. */
  onChange(fn: (ev: MirrorEvent) => void): void {
    this.#listeners.push(fn);
  }

  /** The frozen object, or undefined. */
  find<T extends KubeObject>(resource: string, name: string, namespace = ""): T | undefined {
    return this.#objects.get(resource)?.get(namespace ? `${namespace}/${name}` : name) as
      | T
      | undefined;
  }

  /** The frozen objects of a resource, in no particular order. */
  list<T extends KubeObject>(resource: string): T[] {
    return [...(this.#objects.get(resource)?.values() ?? [])] as T[];
  }

  #apply(ev: ApiServerEvent): void {
    const map = this.#objects.get(ev.resource);
    if (map === undefined) return;
    const object = deepFreeze(ev.object);
    const key = keyOf(object);
    if (ev.type === "DELETED") map.delete(key);
    else map.set(key, object);
    const event: MirrorEvent = {
      type: ev.type,
      resource: ev.resource,
      namespace: ev.namespace,
      name: ev.name,
      resourceVersion: Number(ev.resourceVersion),
      object,
    };
    for (const fn of this.#listeners) fn(event);
  }
}

function keyOf(obj: KubeObject): string {
  return obj.metadata.namespace
    ? `${obj.metadata.namespace}/${obj.metadata.name}`
    : obj.metadata.name;
}
