/**
 * Waiting on something *or* an abort without leaving anything behind on the long-lived side.
 *
 * `await Promise.race([work, pending])` adds a reaction to `pending` that holds `work`'s result
 * and closure until `pending` settles. When `pending` lives as long as a watch, a leadership term
 * or the process (an abort, a stop, a lease loss) and the race runs in a loop, every result read
 * stays reachable: the leak of one retained watch chunk per event. The helpers here subscribe to
 * an `AbortSignal` instead and unsubscribe as soon as the wait ends, so the long-lived side keeps
 * nothing.
 *
 * `AbortSignal.any([longLived, shortLived])` has the same shape of problem: in Deno 2.9 the
 * combined signal stays registered on `longLived` until it aborts (measured: about 360 bytes per
 * call, never freed). {@link linkSignal} is the disposable equivalent.
 *
 * @module
 */

/** What {@link raceAbort} resolves with when the signal aborted first. */
export const ABORTED: unique symbol = Symbol("aborted");

/**
 * Resolves with `promise`'s value, or with {@link ABORTED} when `signal` aborts first (at once if
 * it already has); rejects when `promise` rejects first. The abort listener is removed when the
 * race ends, whichever side ends it, so the signal holds no reference to `promise` or its value.
 *
 * @example
 * ```ts
 * async function nextUnlessStopped<T>(chunks: AsyncIterator<T>, signal: AbortSignal) {
 *   const next = await raceAbort(chunks.next(), signal);
 *   return next === ABORTED ? undefined : next;
 * }
 * ```
 */
export function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal,
): Promise<T | typeof ABORTED> {
  if (signal.aborted) {
    // Nothing waits for it any more; keep a late rejection from going unhandled.
    promise.catch(() => {});
    return Promise.resolve(ABORTED);
  }
  return new Promise<T | typeof ABORTED>((resolve, reject) => {
    const onAbort = () => resolve(ABORTED);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** A signal that follows other signals until disposed; see {@link linkSignal}. */
export interface LinkedSignal {
  /** Aborts (with the first parent's reason) when any parent aborts before {@link dispose}. */
  readonly signal: AbortSignal;
  /** Stops following the parents: removes every listener this link added to them. Idempotent. */
  dispose(): void;
}

/**
 * `AbortSignal.any(parents)` that can be let go: the parents keep a listener only until
 * {@link LinkedSignal.dispose}. Call `dispose` when the operation using the signal ends.
 */
export function linkSignal(...parents: AbortSignal[]): LinkedSignal {
  const controller = new AbortController();
  const listeners: Array<[AbortSignal, () => void]> = [];
  const dispose = () => {
    for (const [parent, listener] of listeners) parent.removeEventListener("abort", listener);
    listeners.length = 0;
  };
  for (const parent of parents) {
    if (parent.aborted) {
      dispose();
      controller.abort(parent.reason);
      break;
    }
    const listener = () => {
      dispose();
      controller.abort(parent.reason);
    };
    parent.addEventListener("abort", listener, { once: true });
    listeners.push([parent, listener]);
  }
  return { signal: controller.signal, dispose };
}
