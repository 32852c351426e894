/**
 * The attacher's startup sequence (external-attacher `cmd/csi-attacher/main.go`): connect to the
 * driver, learn its name and capabilities, pick a handler, then run the informers and the
 * controller until stopped.
 *
 * Each component gets its part of the {@link ComponentSettings} (`./cli/settings.ts`) and the
 * live parts it works with (API clients, stores, queues); nothing here reads the command line's
 * options. Everything the process environment provides (files, environment variables, exit)
 * comes in through {@link AttacherEnv}, so tests and the sandbox run the same code in-process.
 *
 * @module
 */

import type { Clock } from "./clock.ts";
import { realClock } from "./clock.ts";
import type { CsiClient } from "./csi/api.ts";
import { connect, getCapabilities, getDriverName, probeForever } from "./csi/connection.ts";
import { EventRecorder } from "./events/recorder.ts";
import { pendingVolumeAttachments } from "./controller/pending.ts";
import { BacklogReporter } from "./controller/backlog.ts";
import {
  apiInformers,
  buildController,
  buildControllerInformers,
  type BuiltController,
  type ControllerInformers,
  type DriverHandling,
  DUMMY_DRIVER,
  handledDriverName,
} from "./controller/build.ts";
import type { KubeApi } from "./kube/api.ts";
import type { KubeRequestObserver } from "./kube/request_reports.ts";
import type { Logger } from "./observe/logger.ts";
import { DUMMY_DRIVER_NAME } from "./controller/names.ts";
import type { ComponentSettings } from "./cli/settings.ts";
import { type RunningHttpServer, startHttpServer } from "./observe/http_server.ts";
import { LeaderElector } from "./leaderelection/elector.ts";
import { leaderElectionNamespace, leaderIdentity, leaseName } from "./leaderelection/config.ts";
import { raceAbort } from "./abort.ts";
import { type LeaseFence, SOLE_REPLICA } from "./lease_fence.ts";
import { heapCollector, heapReclaimer, pacedCollector } from "./heap.ts";
import { createMetrics, type Metrics } from "./observe/metrics.ts";
import { MIGRATION_DRIVER_NAMES } from "./controller/migration.ts";
import type { LanedWorkQueue } from "./workqueue/lanes.ts";
import { COMPONENT_NAME } from "./component.ts";
import { VERSION } from "./version.ts";

/** The message written to the termination log when the driver connection is lost. */
export const CONNECTION_LOST_MESSAGE = "Lost connection to CSI driver, exiting";

/** What the process provides. */
export interface AttacherEnv {
  /** Ends the process (or the test) with `code`; used for connection loss and lost leadership. */
  exit(code: number): void;
  /** Writes the termination message (`/dev/termination-log`) when possible. */
  writeTerminationMessage(message: string): void;
  /** The host name, the leader-election identity. */
  hostname(): string;
  /** `POD_NAMESPACE`, for the lease namespace. */
  podNamespace?: string;
  /** Reads the service account's namespace file, for the lease namespace. */
  readServiceAccountNamespace?(): string | undefined;
}

/** An API client that {@link runAttacher} owns: it closes it before it returns. */
export interface OwnedKubeApi extends KubeApi {
  /** Ends the client's requests and watches and frees its connections. */
  close(): void | Promise<void>;
}

/** Collaborators of {@link runAttacher}. */
export interface AttacherDeps {
  log: Logger;
  env: AttacherEnv;
  /**
   * Builds an API client: one for the informers and the handler, one for Events and, with
   * leader election, one for the Lease, each with a rate limiter of its own. A client that can
   * report its requests, retries and waits tells `observer` (the metrics). runAttacher closes
   * every client it built before it returns or throws.
   */
  kube: (observer: KubeRequestObserver) => OwnedKubeApi;
  clock?: Clock;
  /** Stops the attacher: workers finish what they are doing, then `runAttacher` resolves. */
  signal: AbortSignal;
  /** Told when the caches have synced and the workers run. */
  onReady?: () => void;
}

/** `source.component` of the Events on VolumeAttachments. */
export const EVENT_COMPONENT = COMPONENT_NAME;

/**
 * Runs the attacher until `deps.signal` aborts, then waits for the work in flight.
 *
 * @throws {Error} for fatal startup failures (driver unreachable, probe failed, no name, the
 *   HTTP endpoint cannot listen); the caller logs them and exits 1.
 */
export async function runAttacher(
  settings: ComponentSettings,
  deps: AttacherDeps,
): Promise<void> {
  const { log } = deps;
  const clock = deps.clock ?? realClock;
  // The one registry of the process, made before anything observes: a CSI-migration driver's
  // label is added to it once the driver's name is known, keeping what was observed before.
  const metrics = createMetrics();
  const clients = new OwnedClients(deps.kube, metrics);
  try {
    const kube = clients.create();
    // The one Event path of the process (the CSI handler's and the leader elector's Events). It
    // has an API client of its own, so Events never take the rate-limiter tokens of attach and
    // detach; it runs until the end of runAttacher and then posts what is still queued.
    // The host name is read once: the Events' host and the leader-election identity.
    const identity = leaderIdentity(deps.env.hostname());
    const events = new EventRecorder({ kube: clients.create(), clock, log }, {
      component: EVENT_COMPONENT,
      host: identity,
    });
    const stopEvents = new AbortController();
    const posting = events.run(stopEvents.signal);
    try {
      const parts = { ...deps, clock, metrics, clients, kube, events, identity };
      await new Attacher(parts, settings).run();
    } finally {
      const drain = clock.setTimer(settings.events.drainMs, () => stopEvents.abort());
      await raceAbort(events.idle(), stopEvents.signal);
      drain.cancel();
      stopEvents.abort();
      await posting;
    }
  } finally {
    await clients.closeAll(log);
  }
}

/** The API clients {@link runAttacher} builds; it closes all of them on every way out. */
class OwnedClients {
  readonly #make: (observer: KubeRequestObserver) => OwnedKubeApi;
  readonly #observer: KubeRequestObserver;
  readonly #clients: OwnedKubeApi[] = [];

  constructor(
    make: (observer: KubeRequestObserver) => OwnedKubeApi,
    observer: KubeRequestObserver,
  ) {
    this.#make = make;
    this.#observer = observer;
  }

  /** A new client reporting to the observer, remembered for {@link closeAll}. */
  create(): OwnedKubeApi {
    const client = this.#make(this.#observer);
    this.#clients.push(client);
    return client;
  }

  /** Closes every client built so far; a failure to close one is logged, not thrown. */
  async closeAll(log: Logger): Promise<void> {
    for (const client of this.#clients.splice(0)) {
      try {
        await client.close();
      } catch (err) {
        log.error(err, "Failed to close an API client");
      }
    }
  }
}

/** What an {@link Attacher} is made with: what the process gives and what lives as long as it. */
interface AttacherParts extends Omit<AttacherDeps, "kube" | "clock"> {
  clock: Clock;
  /** The process's one metrics registry. */
  metrics: Metrics;
  /** Where further API clients come from (the Lease's). */
  clients: OwnedClients;
  /** The API client of the informers and the handler. */
  kube: KubeApi;
  /** The process's Event path. */
  events: EventRecorder;
  /** The leader-election identity and the Events' host: the sanitized host name. */
  identity: string;
}

/** The driver learnt at startup: the handling it calls for, and its client to close. */
interface DriverSetup {
  handling: DriverHandling;
  /** The driver's client; none in dummy mode. */
  csi?: CsiClient;
}

/** The controller's informers, running. */
interface RunningInformers {
  informers: ControllerInformers;
  /** Returns the garbage of a burst (`lib/heap.ts`); undefined without an exposed `gc`. */
  reclaim: (() => void) | undefined;
  /** Settles when every informer stopped. */
  done: Promise<void>;
  /** The first informer that stopped. */
  stopped?: string;
}

/** A term of the controller: whether its caches synced, and the informers it reads. */
interface Term {
  synced: boolean;
  informers: RunningInformers;
}

/**
 * The attacher once its Event path runs: driver setup, the HTTP endpoint, the election, and the
 * controller of each term (every term, without leader election).
 */
class Attacher {
  readonly #parts: AttacherParts;
  readonly #settings: ComponentSettings;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #metrics: Metrics;
  /** Set when the connection to the driver, once made, is lost (the process exits next). */
  #csiLost = false;
  /** The controller's term while it runs. */
  #term: Term | undefined;

  constructor(parts: AttacherParts, settings: ComponentSettings) {
    this.#parts = parts;
    this.#settings = settings;
    this.#log = parts.log;
    this.#clock = parts.clock;
    this.#metrics = parts.metrics;
  }

  /** Runs until the attacher's signal aborts (or leadership is lost); see {@link runAttacher}. */
  async run(): Promise<void> {
    const driver = await this.#setUpDriver();
    try {
      const elector = this.#elector(handledDriverName(driver.handling));
      const http = await this.#startHttpServer(elector);
      try {
        if (elector === undefined) {
          // Without --leader-election the operator runs one replica: nothing to fence against.
          await this.#runController(driver, this.#parts.signal, SOLE_REPLICA);
        } else {
          // Beyond the Go attacher, whose informers start in the term (cmd/csi-attacher/main.go
          // starts its informer factory in the leader's `run`): a warm standby reads the caches
          // from its start, so a takeover begins with them synced. Reading is not acting: no
          // write and no driver call leaves a standby, and a leader works from a watch-fed cache
          // all its term anyway.
          const warm = this.#settings.elector?.warmStandby
            ? this.#startInformers(driver, this.#parts.signal, { reclaimOnSync: true })
            : undefined;
          // Each term's work gets that term's fence, closed for good when the term ends.
          await this.#lead(
            elector,
            (signal, fence) => this.#runController(driver, signal, fence, warm),
          );
          await warm?.done;
        }
      } finally {
        await http?.close();
      }
    } finally {
      driver.csi?.close();
    }
  }

  /**
   * Connects to the driver, probes it until it is ready, reads its name and capabilities (in
   * dummy mode: no driver); the client is closed again when a step fails.
   */
  async #setUpDriver(): Promise<DriverSetup> {
    const { log, env } = this.#parts;
    const settings = this.#settings.csi;
    if (settings.dummy) {
      log.info("Running in dummy mode: no CSI driver", { driver: DUMMY_DRIVER_NAME });
      this.#driverNamed(DUMMY_DRIVER_NAME);
      return { handling: DUMMY_DRIVER };
    }
    const clock = this.#clock;
    const csi = await connect(settings.address, {
      log,
      clock,
      maxGrpcLogLength: settings.maxGrpcLogLength,
      observer: this.#metrics,
      onConnectionLoss: () => {
        this.#csiLost = true;
        env.writeTerminationMessage(CONNECTION_LOST_MESSAGE);
        log.error(new Error("connection lost"), CONNECTION_LOST_MESSAGE);
        env.exit(1);
      },
    });
    try {
      const signal = this.#parts.signal;
      await probeForever(csi, { timeoutMs: settings.callTimeoutMs, clock, log, signal });
      const driverName = await getDriverName(csi);
      log.info("CSI driver name", { driver: driverName });
      // cmd/csi-attacher/main.go names its metrics manager's driver before it asks for the
      // capabilities, so only Probe and GetPluginInfo are observed as `unknown-driver`.
      this.#driverNamed(driverName);
      const caps = await getCapabilities(csi, clock);
      if (!caps.controllerService || !caps.publishUnpublish) {
        log.info("CSI driver does not support ControllerPublishUnpublish, using trivial handler", {
          driver: driverName,
        });
        return { handling: { kind: "trivial", driverName }, csi };
      }
      return { handling: { kind: "csi", driverName, csi, capabilities: caps }, csi };
    } catch (err) {
      csi.close();
      throw err;
    }
  }

  /** Names the metrics' driver, once its name is known (`csi/dummy` in dummy mode). */
  #driverNamed(driverName: string): void {
    this.#metrics.setDriverName(driverName);
    if (MIGRATION_DRIVER_NAMES.has(driverName)) {
      // Where the Go attacher makes its metrics manager again `WithMigration()`: later calls
      // carry the `migrated` label too; the calls observed so far keep their series.
      this.#metrics.addMigratedLabel();
    }
  }

  /** The Lease elector with `--leader-election`, else undefined. */
  #elector(driverName: string): LeaderElector | undefined {
    const settings = this.#settings.elector;
    if (settings === undefined) return undefined;
    const { env, clients, events, identity } = this.#parts;
    return new LeaderElector({
      kube: clients.create(),
      events,
      clock: this.#clock,
      log: this.#log,
      metrics: this.#metrics,
    }, {
      ...settings,
      name: leaseName(driverName),
      namespace: leaderElectionNamespace({
        flag: settings.namespace,
        podNamespaceEnv: env.podNamespace,
        readServiceAccountNamespace: env.readServiceAccountNamespace,
      }),
      identity,
    });
  }

  /** The HTTP endpoint when one is set: metrics, health checks, z-pages. */
  async #startHttpServer(
    elector: LeaderElector | undefined,
  ): Promise<RunningHttpServer | undefined> {
    const settings = this.#settings.http;
    if (settings === undefined) return undefined;
    const clock = this.#clock;
    return await startHttpServer({
      address: settings.address,
      flag: settings.flag,
      metricsPath: settings.metricsPath,
      metrics: this.#metrics,
      leaderHealth: settings.leaderHealth && elector ? () => elector.healthCheck() : undefined,
      health: () => this.#unhealthy(),
      zpages: {
        component: COMPONENT_NAME,
        binaryVersion: VERSION,
        runtimeVersion: `deno ${Deno.version.deno} (V8 ${Deno.version.v8}, TypeScript ` +
          `${Deno.version.typescript})`,
        startTimeMs: clock.wallNow() - clock.now(),
        uptimeMs: () => clock.now(),
        flags: settings.flags,
      },
      log: this.#log,
    });
  }

  /**
   * Why the process is not healthy, for `/healthz`; undefined when it is. A standby is healthy:
   * it has the driver and waits for the Lease (`/healthz/leader-election` tells a leader that
   * cannot renew). A leader, or the attacher without leader election, is healthy once its caches
   * have synced and while its informers run. Losing the driver's connection is unhealthy on both.
   */
  #unhealthy(): string | undefined {
    if (this.#csiLost) return "the connection to the CSI driver was lost";
    const term = this.#term;
    if (term === undefined) {
      return this.#settings.elector === undefined ? "the controller is not running" : undefined;
    }
    const stopped = term.informers.stopped;
    if (stopped !== undefined) return `the ${stopped} informer is not running`;
    if (!term.synced) return "the informers' caches have not synced yet";
    return undefined;
  }

  /** Competes for the Lease and runs `work` in each term; losing it ends the process. */
  async #lead(
    elector: LeaderElector,
    work: (signal: AbortSignal, fence: LeaseFence) => Promise<void>,
  ): Promise<void> {
    const { log, env, identity } = this.#parts;
    await elector.run(this.#parts.signal, {
      onStartedLeading: (leaderSignal, fence) => work(leaderSignal, fence),
      onStoppedLeading: () => {
        log.error(new Error("leader election lost"), "Stopped leading", { identity });
        env.exit(1);
      },
      onNewLeader: (leader) => log.info("New leader elected", { identity: leader }),
    });
  }

  /**
   * Makes the controller's informers for the driver and runs them until `signal` aborts: the
   * PersistentVolumes' once the VolumeAttachments' synced (below), the CSINodes' at once. With
   * `reclaimOnSync` (a standby, whose controller would do it only in its term) the lists' garbage
   * is returned once both synced.
   */
  #startInformers(
    driver: DriverSetup,
    signal: AbortSignal,
    { reclaimOnSync }: { reclaimOnSync: boolean },
  ): RunningInformers {
    // While the lists are read, their garbage is collected as it goes, not only once V8's
    // incremental marking ends long past its limit (lib/heap.ts).
    const collect = heapCollector();
    const onListedObject = collect === undefined ? undefined : pacedCollector(collect);
    const { kube, log } = this.#parts;
    const informers = buildControllerInformers(
      apiInformers({ kube, clock: this.#clock, log }, { watchList: true, onListedObject }),
      this.#settings.controller.resyncMs,
      handledDriverName(driver.handling),
    );
    // The initial lists' garbage, then each burst's (lib/heap.ts).
    const reclaim = heapReclaimer();
    const running: RunningInformers = { informers, reclaim, done: Promise.resolve() };
    const run = (name: string, informer: { run(signal: AbortSignal): Promise<void> }) =>
      informer.run(signal).finally(() => {
        running.stopped ??= name;
      });
    const volumeAttachments = run("volumeattachments", informers.volumeAttachments);
    // Beyond the Go attacher, whose informer factory starts every informer at once
    // (client-go tools/cache/shared_informer.go): the PersistentVolumes' initial list is read
    // once the VolumeAttachments' is. On one thread the two lists take as long one after the
    // other as interleaved, and only one list's garbage is alive at a time, which is a
    // takeover's peak RSS.
    const persistentVolumes = Promise.race([
      informers.volumeAttachments.waitForSync(signal).then(() => true, () => false),
      volumeAttachments.then(() => false, () => false),
    ]).then((synced) => synced ? run("persistentvolumes", informers.persistentVolumes) : undefined);
    const csiNodes = run("csinodes", informers.csiNodes);
    running.done = Promise.all([volumeAttachments, persistentVolumes, csiNodes]).then(() => {});
    if (reclaimOnSync && reclaim !== undefined) {
      Promise.all([
        informers.volumeAttachments.waitForSync(signal),
        informers.persistentVolumes.waitForSync(signal),
      ]).then(reclaim, () => {
        // stopped before the caches synced
      });
    }
    return running;
  }

  /**
   * Runs the controller until `signal` aborts and the work in flight is done, on the `warm`
   * standby's informers or, without them, on informers of its own that run as long. `fence` is
   * the term's lease fence (SOLE_REPLICA without leader election), asked before each act.
   */
  async #runController(
    driver: DriverSetup,
    signal: AbortSignal,
    fence: LeaseFence,
    warm?: RunningInformers,
  ): Promise<void> {
    const running = warm ?? this.#startInformers(driver, signal, { reclaimOnSync: false });
    const reclaim = running.reclaim;
    const { kube, events, log } = this.#parts;
    const built = buildController(
      {
        kube,
        informers: running.informers,
        log,
        clock: this.#clock,
        fence,
        events,
        metrics: this.#metrics,
        afterSync: reclaim,
        whenIdle: reclaim,
      },
      { ...this.#settings.controller, callTimeoutMs: this.#settings.csi.callTimeoutMs },
      driver.handling,
    );
    const { informers, driverName } = built;
    const term: Term = { synced: false, informers: running };
    this.#term = term;
    const synced = this.#whenSynced(built, term, signal);
    // Beyond the Go attacher: the backlog as gauges and as a periodic log line.
    this.#metrics.setPendingSource(() =>
      pendingVolumeAttachments(informers.volumeAttachments.list(), {
        driverName,
        nowMs: this.#clock.wallNow(),
      })
    );
    const backlog = this.#reportBacklog([built.vaQueue, built.pvQueue], signal);
    try {
      await Promise.all([
        built.controller.run(signal),
        synced,
        backlog,
        warm === undefined ? running.done : undefined,
      ]);
    } finally {
      this.#metrics.setPendingSource(undefined);
      if (this.#term === term) this.#term = undefined;
    }
  }

  /** Marks the term synced once the VolumeAttachment and PersistentVolume caches synced. */
  async #whenSynced(
    { informers }: BuiltController,
    term: { synced: boolean },
    signal: AbortSignal,
  ): Promise<void> {
    try {
      await Promise.all([
        informers.volumeAttachments.waitForSync(signal),
        informers.persistentVolumes.waitForSync(signal),
      ]);
    } catch {
      return; // stopped before the caches synced
    }
    term.synced = true;
    this.#parts.onReady?.();
  }

  /** Beyond the Go attacher: the backlog line every `--log-backlog-interval`, when not 0. */
  async #reportBacklog(queues: LanedWorkQueue[], signal: AbortSignal): Promise<void> {
    const intervalMs = this.#settings.controller.logBacklogIntervalMs;
    if (intervalMs <= 0) return;
    await new BacklogReporter({ clock: this.#clock, log: this.#log }, {
      queues: queues.map((queue) => ({ name: queue.name, queue })),
      intervalMs,
    }).run(signal);
  }
}
