/**
 * Read access to the objects a reflector keeps in memory, and the callbacks it delivers.
 *
 * @module
 */

/** A read-only cache of cluster-scoped objects, keyed by name. */
export interface ObjectStore<T> {
  get(name: string): T | undefined;
  list(): T[];
}

/**
 * Callbacks of an informer. They run synchronously in the reflector's loop and MUST NOT modify
 * the objects they receive; anything slow belongs in a workqueue.
 */
export interface EventHandlers<T> {
  add?(obj: T): void;
  /** `oldObj` is the cached object before the change; on a resync both are the same object. */
  update?(oldObj: T, newObj: T): void;
  /** The last known state of the deleted object. */
  delete?(obj: T): void;
}
