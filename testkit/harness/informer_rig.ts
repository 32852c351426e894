/**
 * An {@link Informer} of PersistentVolumes over a {@link FakeListWatch} and a fake clock, with
 * its callbacks and log lines recorded: the rig of the informer's and the reflector's tests
 * (`lib/kube/informer_test.ts`, `lib/kube/reflector_test.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { FakeClock } from "../fakes/fake_clock.ts";
import { Informer, type InformerOptions } from "../../lib/kube/informer.ts";
import { PERSISTENT_VOLUMES } from "../../lib/kube/api.ts";
import type { Fields, Logger } from "../../lib/observe/logger.ts";
import type { KubeObject, PersistentVolume, Status } from "../../lib/kube/types.ts";
import { FakeListWatch, flushPromises } from "../fakes/fake_list_watch.ts";

export interface LogLine {
  level: "info" | "error";
  msg: string;
  err?: unknown;
  fields: Fields;
}

/** The resourceVersion of the last cache replacement (list or watch list) the informer logged. */
export function listedResourceVersion(lines: LogLine[]): unknown {
  return lines.findLast((l) => l.msg === "Listed")?.fields.resourceVersion;
}

/** A logger that keeps every line, at every verbosity. */
export function recordingLogger(lines: LogLine[], bound: Fields = {}): Logger {
  const info = (msg: string, fields?: Fields) =>
    lines.push({ level: "info", msg, fields: { ...bound, ...fields } });
  return {
    info,
    error: (err, msg, fields) =>
      lines.push({ level: "error", msg, err, fields: { ...bound, ...fields } }),
    v: () => ({ info }),
    enabled: () => true,
    with: (fields) => recordingLogger(lines, { ...bound, ...fields }),
  };
}

export function pv(
  name: string,
  rv: string,
  extra: Record<string, unknown> = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name,
      resourceVersion: rv,
      managedFields: [{ manager: "kube-controller-manager", operation: "Update" }],
    },
    spec: { csi: { driver: "d", volumeHandle: `h-${name}` }, ...extra },
  };
}

/** The bookmark that ends a watch list's initial events. */
export function initialEventsEnd(resourceVersion: string) {
  return {
    type: "BOOKMARK" as const,
    object: {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "",
        resourceVersion,
        annotations: { "k8s.io/initial-events-end": "true" },
      },
    } as unknown as PersistentVolume,
  };
}

export function status(code: number, reason: string, message: string): Status {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    code,
    reason,
    message,
  };
}

/** `name@rv` of an object, for compact event records. */
export function id(obj: KubeObject): string {
  return `${obj.metadata.name}@${obj.metadata.resourceVersion}`;
}

export interface Setup {
  api: FakeListWatch;
  clock: FakeClock;
  informer: Informer<PersistentVolume>;
  /** Events as `add a@1`, `update a@1>a@2`, `delete a@2`. */
  events: string[];
  /** Every [old, new] pair given to update. */
  updates: Array<[PersistentVolume, PersistentVolume]>;
  deleted: PersistentVolume[];
  logs: LogLine[];
  ctl: AbortController;
  done: Promise<void>;
  /** Aborts, waits for run() and checks that no timer is left behind. */
  stop(): Promise<void>;
}

export function setup(
  opts: Partial<InformerOptions<PersistentVolume>> = {},
  random: () => number = () => 0,
): Setup {
  const api = new FakeListWatch();
  const clock = new FakeClock(0);
  const logs: LogLine[] = [];
  const informer = new Informer<PersistentVolume>(
    { kube: api, clock, log: recordingLogger(logs), random },
    { resource: PERSISTENT_VOLUMES, resyncMs: 0, ...opts },
  );
  const events: string[] = [];
  const updates: Array<[PersistentVolume, PersistentVolume]> = [];
  const deleted: PersistentVolume[] = [];
  informer.addHandlers({
    add: (o) => events.push(`add ${id(o)}`),
    update: (o, n) => {
      events.push(`update ${id(o)}>${id(n)}`);
      updates.push([o, n]);
    },
    delete: (o) => {
      events.push(`delete ${id(o)}`);
      deleted.push(o);
    },
  });
  const ctl = new AbortController();
  const done = informer.run(ctl.signal);
  return {
    api,
    clock,
    informer,
    events,
    updates,
    deleted,
    logs,
    ctl,
    done,
    async stop() {
      ctl.abort();
      await done;
      assert.equal(clock.pendingTimers(), 0, "timers left after run() resolved");
    },
  };
}

/** The delay of the only pending timer (the backoff sleep). */
export function pendingDelay(clock: FakeClock): number {
  assert.equal(clock.pendingTimers(), 1, "expected exactly one pending timer");
  return clock.nextTimerAt()! - clock.now();
}

/** Starts a setup and answers its first list with `items` at resourceVersion `rv`. */
export async function synced(
  items: PersistentVolume[],
  rv: string,
  opts: Partial<InformerOptions<PersistentVolume>> = {},
  random?: () => number,
): Promise<Setup> {
  const s = setup(opts, random);
  (await s.api.expectList()).resolve(items, rv);
  await flushPromises();
  return s;
}
