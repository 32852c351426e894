/**
 * The workqueue contracts, after client-go's `util/workqueue`.
 *
 * Guarantees: a key is handed to at most one worker at a time; adding a key that is already
 * waiting does nothing; a key added while it is being processed is processed again after `done`.
 *
 * @module
 */

/**
 * The plain queue of keys: client-go's `workqueue.TypedInterface` (`Add`, `Get`, `Done`, `Len`,
 * `ShutDown`, `ShutDownWithDrain`, `ShuttingDown`).
 */
export interface Queue {
  /** Marks `key` as needing processing. */
  add(key: string): void;
  /**
   * Waits for a key to process; a key that is ready is taken at once (synchronously) and the
   * promise resolves with it. Resolves `undefined` once the queue is shut down and no key is
   * ready. The caller MUST call {@link Queue.done} with the key when it is finished with it.
   */
  get(): Promise<string | undefined>;
  /** Ends the processing of `key`; if it was added meanwhile it becomes ready again. */
  done(key: string): void;
  /** Keys waiting to be processed (informational only). */
  len(): number;
  /** Stops handing out keys; `get` resolves undefined once no key is ready. */
  shutDown(): void;
  /** Like {@link Queue.shutDown}, and resolves once every key handed out is done. */
  shutDownWithDrain(): Promise<void>;
  /** True once {@link Queue.shutDown} was called. */
  shuttingDown(): boolean;
}

/** The oldest key waiting in a lane, for backlog reports. */
export interface OldestReady {
  key: string;
  /** When it was added (ms of the queue clock). */
  addedAt: number;
}

/**
 * A queue whose ready keys are split into lanes, each with its own workers (the controller's
 * attach and detach lanes), and which tells what its backlog and each key's state are. Not in
 * client-go: the policy of one controller, built around the plain {@link Queue} (`lanes.ts`).
 */
export interface LanedQueue extends Queue {
  /** Like {@link Queue.get}, for a key of `lane` only, or (undefined) of any lane. */
  get(lane?: string): Promise<string | undefined>;
  /** Keys waiting to be processed, in `lane` or in all lanes (informational only). */
  len(lane?: string): number;
  /** The lanes of ready keys, each with its own workers. */
  lanes(): readonly string[];
  /** The key of `lane` that has waited longest and when it was added, or undefined. */
  oldestReady(lane: string): OldestReady | undefined;
  /** True while `key` is ready to be handed out or is being processed (not while delayed). */
  isQueuedOrProcessing(key: string): boolean;
}

/** A queue that can add keys later. */
export interface DelayingQueue extends Queue {
  /** Adds `key` after `ms` milliseconds of the queue's clock. */
  addAfter(key: string, ms: number): void;
}

/** Decides how long a key waits before its next retry. */
export interface RateLimiter {
  /** The delay before `key` is retried, counting this failure. */
  when(key: string): number;
  /** Forgets the failures of `key`. */
  forget(key: string): void;
  /** How many times `key` has failed since it was last forgotten. */
  numRequeues(key: string): number;
}

/** A delaying queue with per-key backoff (client-go's `RateLimitingInterface`). */
export interface RateLimitingQueue extends DelayingQueue {
  /** Adds `key` after the delay the rate limiter gives it. */
  addRateLimited(key: string): void;
  /**
   * Resets the backoff of `key`. This only clears the rate limiter: the caller still has to call
   * `done`.
   */
  forget(key: string): void;
  numRequeues(key: string): number;
}
