/**
 * An in-memory {@link KubeApi} whose `list` and `watch` calls the test answers one step at a time,
 * for unit tests of the informer. Every call waits until the test answers it; nothing runs on real
 * time. The other KubeApi methods reject.
 *
 * @example
 * ```ts
 * const api = new FakeListWatch();
 * const done = informer.run(ctl.signal);
 * (await api.expectList()).resolve([pv("a", "1")], "10");
 * const w = await api.expectWatch();
 * w.send({ type: "MODIFIED", object: pv("a", "11") });
 * ```
 *
 * @module
 */

import type {
  KubeApi,
  ListOptions,
  ObjectList,
  Resource,
  WatchEvent,
  WatchOptions,
} from "../../lib/kube/api.ts";
import type { KubeObject } from "../../lib/kube/types.ts";

/**
 * Lets every promise callback that is already due run: enough microtask turns for the informer to
 * move from one API call to the next. Never waits on a timer.
 */
export async function flushPromises(turns = 200): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}

/** One `list` call waiting for the test's answer. */
export class PendingList {
  /** The resource and options the call was made with. */
  readonly resource: Resource;
  readonly opts: (ListOptions) | undefined;
  #resolve: (list: ObjectList<KubeObject>) => void;
  #reject: (err: unknown) => void;

  constructor(
    resource: Resource,
    opts: (ListOptions) | undefined,
    resolve: (list: ObjectList<KubeObject>) => void,
    reject: (err: unknown) => void,
  ) {
    this.resource = resource;
    this.opts = opts;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  /** Answers the list with these items and list resourceVersion. */
  resolve(items: KubeObject[], resourceVersion: string): void {
    this.#resolve({ items, resourceVersion });
  }

  /** Fails the list. */
  reject(err: unknown): void {
    this.#reject(err);
  }
}

type Step = { event: WatchEvent<KubeObject> } | { end: true } | { error: unknown };

/**
 * One `watch` call: an async iterable the test feeds with {@link FakeWatch.send}, closes with
 * {@link FakeWatch.end} or fails with {@link FakeWatch.fail}. Aborting the call's signal ends the
 * iteration without an error, as the real client does.
 */
export class FakeWatch implements AsyncIterable<WatchEvent<KubeObject>> {
  /** The resource and options the watch was started with. */
  readonly resource: Resource;
  readonly opts: WatchOptions;
  #steps: Step[] = [];
  #waiter: (() => void) | undefined;
  #iterated = false;
  #closed = false;

  constructor(resource: Resource, opts: WatchOptions) {
    this.resource = resource;
    this.opts = opts;
    opts.signal.addEventListener("abort", () => this.#wake(), { once: true });
  }

  /** True once the consumer stopped reading: iteration finished, `return()` or abort. */
  get closed(): boolean {
    return this.#closed || this.opts.signal.aborted;
  }

  /** Queues one event. */
  send(event: WatchEvent<KubeObject>): void {
    this.#steps.push({ event });
    this.#wake();
  }

  /** Ends the stream normally, as the server does when `timeoutSeconds` elapse. */
  end(): void {
    this.#steps.push({ end: true });
    this.#wake();
  }

  /** Makes the stream reject, as a broken connection does. */
  fail(err: unknown): void {
    this.#steps.push({ error: err });
    this.#wake();
  }

  #wake(): void {
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.();
  }

  [Symbol.asyncIterator](): AsyncIterator<WatchEvent<KubeObject>> {
    if (this.#iterated) throw new Error("FakeWatch can be iterated only once");
    this.#iterated = true;
    const done = (): IteratorResult<WatchEvent<KubeObject>> => {
      this.#closed = true;
      return { done: true, value: undefined };
    };
    return {
      next: async () => {
        for (;;) {
          if (this.#closed || this.opts.signal.aborted) return done();
          const step = this.#steps.shift();
          if (step === undefined) {
            await new Promise<void>((resolve) => this.#waiter = resolve);
            continue;
          }
          if ("event" in step) return { done: false, value: step.event };
          if ("end" in step) return done();
          this.#closed = true;
          throw step.error;
        }
      },
      return: () => {
        const result = done();
        this.#wake();
        return Promise.resolve(result);
      },
    };
  }
}

/** A {@link KubeApi} with scripted `list` and `watch`; see the module doc. */
export class FakeListWatch implements KubeApi {
  /** Every list call, answered or not, in order. */
  readonly lists: PendingList[] = [];
  /** Every watch call, in order. */
  readonly watches: FakeWatch[] = [];
  #listsTaken = 0;
  #watchesTaken = 0;

  list<T extends KubeObject>(
    res: Resource,
    opts?: ListOptions,
  ): Promise<ObjectList<T>> {
    return new Promise((resolve, reject) => {
      const signal = opts?.signal;
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => reject(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = <A>(fn: (a: A) => void) => (a: A) => {
        signal?.removeEventListener("abort", onAbort);
        fn(a);
      };
      this.lists.push(
        new PendingList(
          res,
          opts,
          settle((list: ObjectList<KubeObject>) => resolve(list as ObjectList<T>)),
          settle(reject),
        ),
      );
    });
  }

  watch<T extends KubeObject>(res: Resource, opts: WatchOptions): AsyncIterable<WatchEvent<T>> {
    const w = new FakeWatch(res, opts);
    this.watches.push(w);
    return w as unknown as AsyncIterable<WatchEvent<T>>;
  }

  /**
   * Flushes pending promises, then returns the next list call not yet taken.
   * @throws {Error} when no such call was made.
   */
  async expectList(): Promise<PendingList> {
    await flushPromises();
    const call = this.lists[this.#listsTaken];
    if (call === undefined) {
      throw new Error(
        `Expected list call #${this.#listsTaken + 1}, but there were ${this.lists.length}`,
      );
    }
    this.#listsTaken++;
    return call;
  }

  /**
   * Flushes pending promises, then returns the next watch call not yet taken.
   * @throws {Error} when no such call was made.
   */
  async expectWatch(): Promise<FakeWatch> {
    await flushPromises();
    const call = this.watches[this.#watchesTaken];
    if (call === undefined) {
      throw new Error(
        `Expected watch call #${this.#watchesTaken + 1}, but there were ${this.watches.length}`,
      );
    }
    this.#watchesTaken++;
    return call;
  }

  /** Flushes pending promises, then fails unless no list or watch call is left untaken. */
  async expectNoCall(): Promise<void> {
    await flushPromises();
    const lists = this.lists.length - this.#listsTaken;
    const watches = this.watches.length - this.#watchesTaken;
    if (lists !== 0 || watches !== 0) {
      throw new Error(`Expected no new call, got ${lists} list(s) and ${watches} watch(es)`);
    }
  }

  get(): Promise<never> {
    return Promise.reject(new Error("FakeListWatch supports only list and watch"));
  }
  create(): Promise<never> {
    return Promise.reject(new Error("FakeListWatch supports only list and watch"));
  }
  update(): Promise<never> {
    return Promise.reject(new Error("FakeListWatch supports only list and watch"));
  }
  patch(): Promise<never> {
    return Promise.reject(new Error("FakeListWatch supports only list and watch"));
  }
  delete(): Promise<never> {
    return Promise.reject(new Error("FakeListWatch supports only list and watch"));
  }
}
