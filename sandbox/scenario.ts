/**
 * The sandbox scenario: an in-memory API server, a CSI driver (the built-in example driver on a
 * unix socket in a temporary directory, or a real driver's socket) and the real attacher
 * (`runAttacher`), all in this process. The scenario creates a PersistentVolume, a CSINode and a
 * VolumeAttachment, waits until the volume is attached, deletes the VolumeAttachment and waits
 * until it is detached, then deletes the PersistentVolume and waits until the attacher released
 * it, printing a timeline of the attacher's API requests and CSI calls on the way.
 *
 * Waiting is event driven (the API server's change events), bounded by a timeout per step.
 *
 * @module
 */

import { runAttacher } from "../lib/run.ts";
import type { CsiDriverServer } from "../testkit/csi/server.ts";
import {
  ExampleDriver,
  type ExampleDriverOptions,
  type Publication,
} from "../testkit/csi/example_driver.ts";
import { CSI_NODES, PERSISTENT_VOLUMES, SECRETS, VOLUME_ATTACHMENTS } from "../lib/kube/api.ts";
import { KubeClient } from "../lib/kube/client.ts";
import { connectionFromKubeconfigs } from "../lib/kube/config.ts";
import { createLogger } from "../lib/observe/log.ts";
import { errorText } from "../lib/errors.ts";
import { type Logger, nullLogger } from "../lib/observe/logger.ts";
import { MemoryApiServer, type RecordedRequest } from "../testkit/apiserver/server.ts";
import { DUMMY_DRIVER_NAME } from "../lib/controller/names.ts";
import { type Options, parseOptions, validateOptions } from "../lib/cli/options.ts";
import { componentSettings } from "../lib/cli/settings.ts";
import type {
  CsiNode,
  PersistentVolume,
  PersistentVolumeSpec,
  Secret,
  VolumeAttachment,
} from "../lib/kube/types.ts";
import { VERSION } from "../lib/version.ts";
import { createCsiCallTap, type CsiCallEvent } from "./csi_call_tap.ts";
import { recordingKubeApi } from "./recording_kube_api.ts";
import { showValue, Timeline } from "./timeline.ts";

/** Name of the PersistentVolume the scenario creates. */
export const SANDBOX_PV_NAME = "pv-1";
/** Name of the VolumeAttachment the scenario creates. */
export const SANDBOX_VA_NAME = "va-1";
/** Name of the Secret created for `controllerPublishSecretRef` (namespace `default`). */
export const SANDBOX_SECRET_NAME = "sandbox-publish-secret";
/** Namespace of the Secret and of the Lease (with `--leader-election`). */
export const SANDBOX_NAMESPACE = "default";
/** The leader-election identity of the sandbox's attacher. */
export const SANDBOX_IDENTITY = "csi-attacher-sandbox";

/** What the scenario does. */
export interface ScenarioConfig {
  /** A real driver's endpoint (`/path/csi.sock`, `unix://…` or `host:port`); unset: built in. */
  csiAddress?: string;
  /** `spec.csi.volumeHandle` of the PV; the built-in driver gets a volume of this ID. */
  volumeHandle: string;
  /** The driver's node ID, put into the CSINode. */
  nodeId: string;
  /** The Kubernetes node name (CSINode name, VolumeAttachment `spec.nodeName`). */
  nodeName: string;
  /** The PV's access mode, e.g. `ReadWriteOnce`. */
  accessMode: string;
  /** `spec.csi.fsType`; "" for none. */
  fsType: string;
  /** `spec.csi.readOnly`. */
  readOnly: boolean;
  /** `spec.csi.volumeAttributes` (the CSI volume context). */
  volumeAttributes: Record<string, string>;
  /** When set, a Secret with these keys becomes the PV's `controllerPublishSecretRef`. */
  secret?: Record<string, string>;
  /** Upper bound of each wait (startup, attach, detach, release), in ms. */
  waitTimeoutMs: number;
  /** Extra attacher command-line flags (e.g. `--leader-election`, `--timeout=5s`). */
  attacherArgs: readonly string[];
  /** Verbosity of the attacher's log lines in the output; unset: no log lines. */
  verbosity?: number;
  /** Faults of the built-in driver (see `testkit/csi/driver_faults.ts`); none when unset. */
  driverOptions?: Pick<ExampleDriverOptions, "faults" | "nonIdempotent">;
}

/** Where the scenario writes. */
export interface ScenarioIo {
  /** Receives one output line, without a trailing newline. */
  write(line: string): void;
}

/** What happened, for the caller and for tests. */
export interface ScenarioReport {
  /** 0: attached, detached and released; 1: something failed; 2: bad attacher flags. */
  exitCode: number;
  /** Every request the API server received, oldest first (after the attacher stopped). */
  requests: RecordedRequest[];
  /** The built-in driver's publications at the end; undefined with a real driver. */
  publications?: Publication[];
}

/** A wait that ended without reaching the state. */
type WaitFailure = { ok: false; why: "timeout" | "stopped" };

/** Counts the attacher's API requests and CSI calls in flight. */
class Activity {
  #inFlight = 0;
  #waiters: (() => void)[] = [];

  start(): void {
    this.#inFlight += 1;
  }

  finish(): void {
    this.#inFlight = Math.max(0, this.#inFlight - 1);
    if (this.#inFlight === 0) {
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  /**
   * Resolves once nothing is in flight and nothing new started during one more macrotask (so
   * the follow-up request of a handler that just got an answer is waited for too), or when
   * `stop` aborts.
   */
  async settled(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      if (this.#inFlight > 0) {
        await new Promise<void>((resolve) => {
          const onAbort = () => resolve();
          stop.addEventListener("abort", onAbort, { once: true });
          this.#waiters.push(() => {
            stop.removeEventListener("abort", onAbort);
            resolve();
          });
        });
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (this.#inFlight === 0) return;
    }
  }
}

/** An AbortSignal that aborts after `ms`, with a way to cancel the timer. */
function deadline(ms: number): { signal: AbortSignal; cancel(): void } {
  const controller = new AbortController();
  const id = setTimeout(() => controller.abort(), ms);
  return { signal: controller.signal, cancel: () => clearTimeout(id) };
}

/**
 * Resolves with the first non-undefined `check()` result, checked now and after every change
 * on the server; or fails when `timeout` or `stopped` aborts first.
 */
function waitForState<T>(
  server: MemoryApiServer,
  check: () => T | undefined,
  timeout: AbortSignal,
  stopped: AbortSignal,
): Promise<{ ok: true; value: T } | WaitFailure> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (result: { ok: true; value: T } | WaitFailure) => {
      if (done) return;
      done = true;
      unsubscribe();
      timeout.removeEventListener("abort", onTimeout);
      stopped.removeEventListener("abort", onStopped);
      resolve(result);
    };
    const onTimeout = () => finish({ ok: false, why: "timeout" });
    const onStopped = () => finish({ ok: false, why: "stopped" });
    const probe = () => {
      const value = check();
      if (value !== undefined) finish({ ok: true, value });
    };
    const unsubscribe = server.onEvent(probe);
    timeout.addEventListener("abort", onTimeout, { once: true });
    stopped.addEventListener("abort", onStopped, { once: true });
    if (stopped.aborted) onStopped();
    else if (timeout.aborted) onTimeout();
    else probe();
  });
}

/** The file path of a unix-socket address, or undefined for a TCP address. */
function socketPath(address: string): string | undefined {
  if (address.startsWith("/")) return address;
  if (address.startsWith("unix://")) return address.slice("unix://".length);
  if (address.startsWith("unix:")) return address.slice("unix:".length);
  return undefined;
}

/** What the tap learned about the driver from the attacher's startup calls. */
interface DriverInfo {
  name?: string;
  vendorVersion?: string;
  publishUnpublish?: boolean;
}

function learnDriver(info: DriverInfo, event: CsiCallEvent): void {
  if (event.kind !== "response") return;
  if (event.method === "GetPluginInfo") {
    if (typeof event.response.name === "string") info.name = event.response.name;
    if (typeof event.response.vendorVersion === "string") {
      info.vendorVersion = event.response.vendorVersion;
    }
  } else if (event.method === "ControllerGetCapabilities") {
    const caps = Array.isArray(event.response.capabilities) ? event.response.capabilities : [];
    info.publishUnpublish = caps.some((c: unknown) =>
      typeof c === "object" && c !== null &&
      (c as { rpc?: { type?: unknown } }).rpc?.type === "PUBLISH_UNPUBLISH_VOLUME"
    );
  }
}

/** Parses the attacher flags; on failure writes what `main.ts` would and returns the status. */
function attacherOptions(args: readonly string[], io: ScenarioIo): Options | number {
  const parsed = parseOptions(args, { program: "csi-attacher" });
  if (!parsed.ok) {
    if ("help" in parsed) {
      for (const line of parsed.usage.trimEnd().split("\n")) io.write(line);
      return 0;
    }
    if ("version" in parsed) {
      io.write(`csi-attacher ${VERSION}`);
      return 0;
    }
    io.write(`attacher flags: ${parsed.error}`);
    if (parsed.exitCode === 2) {
      for (const line of parsed.usage.trimEnd().split("\n")) io.write(line);
      return 2;
    }
    io.write(`attacher flags: ${errorText(parsed.cause)}`);
    return 1;
  }
  const invalid = validateOptions(parsed.options);
  if (invalid !== undefined) {
    io.write(`attacher flags: ${invalid}`);
    return 1;
  }
  return parsed.options;
}

function pvFor(config: ScenarioConfig, driver: string): PersistentVolume {
  const spec: PersistentVolumeSpec = {
    accessModes: [config.accessMode],
    capacity: { storage: "1Gi" },
    persistentVolumeReclaimPolicy: "Retain",
    csi: { driver, volumeHandle: config.volumeHandle, readOnly: config.readOnly },
  };
  const csi = spec.csi!;
  if (config.fsType !== "") csi.fsType = config.fsType;
  if (Object.keys(config.volumeAttributes).length > 0) {
    csi.volumeAttributes = { ...config.volumeAttributes };
  }
  if (config.secret !== undefined) {
    csi.controllerPublishSecretRef = { name: SANDBOX_SECRET_NAME, namespace: SANDBOX_NAMESPACE };
  }
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: SANDBOX_PV_NAME },
    spec,
  };
}

/**
 * Runs the scenario once and cleans up everything it started (servers, the attacher, the
 * temporary directory), whatever the outcome.
 *
 * Output: a header, the timeline (see {@link Timeline}), one line per outcome and a final
 * `Outcome: OK` or `Outcome: FAILED (...)`. A driver error appears as the attacher records it:
 * `status.attachError.message` / `status.detachError.message`. Secret values are never written.
 */
export async function runScenario(config: ScenarioConfig, io: ScenarioIo): Promise<ScenarioReport> {
  const parsedOptions = attacherOptions(config.attacherArgs, io);
  if (typeof parsedOptions === "number") return { exitCode: parsedOptions, requests: [] };

  const write = (line: string) => io.write(line);
  const timeline = new Timeline({ write });
  const activity = new Activity();
  const driverInfo: DriverInfo = {};
  const display: Logger = config.verbosity === undefined
    ? nullLogger
    : createLogger({ verbosity: config.verbosity, format: "text", write });
  const log = createCsiCallTap(display, (event) => {
    if (event.kind === "call") activity.start();
    else activity.finish();
    learnDriver(driverInfo, event);
    timeline.csi(event);
  });

  const server = await MemoryApiServer.start();
  const stop = new AbortController();
  const ended = new AbortController();
  const clients: KubeClient[] = [];
  let dir: string | undefined;
  let builtIn: ExampleDriver | undefined;
  let driverServer: CsiDriverServer | undefined;
  let running: Promise<void> | undefined;
  let startError: unknown;
  let exitRequested: number | undefined;
  const report: ScenarioReport = { exitCode: 1, requests: [] };
  try {
    let address: string;
    if (config.csiAddress === undefined) {
      dir = await Deno.makeTempDir({ prefix: "csi-attacher-sandbox-" });
      builtIn = new ExampleDriver({}, { nodeIds: [config.nodeId], ...config.driverOptions });
      builtIn.createVolume(config.volumeHandle);
      driverServer = await builtIn.start(`${dir}/csi.sock`);
      address = driverServer.address;
      write("csi-attacher sandbox: in-memory API server, built-in example CSI driver, attacher");
    } else {
      address = config.csiAddress;
      const path = socketPath(address);
      if (path !== undefined) {
        try {
          await Deno.stat(path);
        } catch (err) {
          write(`Cannot use the CSI driver at ${address}: ${errorText(err)}`);
          write("Outcome: FAILED (no driver)");
          return report;
        }
      }
      write(`csi-attacher sandbox: in-memory API server, CSI driver at ${address}, attacher`);
    }
    const options: Options = { ...parsedOptions, csiAddress: address };

    const connection = await connectionFromKubeconfigs([
      { file: "memory-apiserver", text: server.kubeconfig() },
    ]);
    const ready = Promise.withResolvers<void>();
    running = runAttacher(componentSettings(options), {
      log,
      signal: stop.signal,
      kube: () => {
        const client = new KubeClient({ connection, log }, {
          userAgent: `csi-attacher/${VERSION}`,
        });
        clients.push(client);
        const recorded = recordingKubeApi(client, {
          onStart: () => activity.start(),
          onFinish: (record) => {
            activity.finish();
            timeline.api(record);
          },
        });
        return { ...recorded, close: () => client.close() };
      },
      env: {
        exit: (code) => {
          exitRequested = code;
          stop.abort();
        },
        writeTerminationMessage: (message) => write(`Attacher termination message: ${message}`),
        hostname: () => SANDBOX_IDENTITY,
        podNamespace: SANDBOX_NAMESPACE,
      },
      onReady: () => ready.resolve(),
    });
    running.then(
      () => ended.abort(),
      (err: unknown) => {
        startError = err;
        ended.abort();
      },
    );
    write("");
    write("Timeline (API requests and CSI calls of the attacher, in the order they finished):");

    // Startup: the attacher connects, probes, reads the driver's name and capabilities.
    const startup = deadline(config.waitTimeoutMs);
    const started = await Promise.race([
      ready.promise.then(() => "ready" as const),
      new Promise<"stopped">((resolve) => {
        if (ended.signal.aborted) resolve("stopped");
        ended.signal.addEventListener("abort", () => resolve("stopped"), { once: true });
      }),
      new Promise<"timeout">((resolve) => {
        startup.signal.addEventListener("abort", () => resolve("timeout"), { once: true });
      }),
    ]);
    startup.cancel();
    if (started !== "ready") {
      write(
        started === "timeout"
          ? `The attacher did not start within ${config.waitTimeoutMs / 1000}s`
          : `The attacher stopped during startup: ${
            startError === undefined ? `exit status ${exitRequested}` : errorText(startError)
          }`,
      );
      write("Outcome: FAILED (startup)");
      return report;
    }
    await activity.settled(ended.signal);
    const driverName = driverInfo.name ?? (options.dummy ? DUMMY_DRIVER_NAME : "");
    if (driverInfo.publishUnpublish === false) {
      timeline.line(
        "sandbox",
        `driver ${driverName} has no PUBLISH_UNPUBLISH_VOLUME: the attacher marks ` +
          "VolumeAttachments attached without CSI calls",
      );
    }

    // Objects, as the PV controller, kubelet and the AD controller would create them.
    if (config.secret !== undefined) {
      const data = Object.fromEntries(
        Object.entries(config.secret).map(([k, v]) => [k, btoa(v)]),
      );
      server.create<Secret>(SECRETS, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: SANDBOX_SECRET_NAME, namespace: SANDBOX_NAMESPACE },
        data,
      });
      timeline.line(
        "sandbox",
        `create secrets/${SANDBOX_NAMESPACE}/${SANDBOX_SECRET_NAME} (keys: ${
          Object.keys(config.secret).sort().join(", ")
        })`,
      );
    }
    server.create(PERSISTENT_VOLUMES, pvFor(config, driverName));
    timeline.line(
      "sandbox",
      `create persistentvolumes/${SANDBOX_PV_NAME} (driver ${driverName}, volume handle ${config.volumeHandle}, ${config.accessMode})`,
    );
    server.create<CsiNode>(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: config.nodeName },
      spec: { drivers: [{ name: driverName, nodeID: config.nodeId, topologyKeys: null }] },
    });
    timeline.line(
      "sandbox",
      `create csinodes/${config.nodeName} (driver ${driverName}, node ID ${config.nodeId})`,
    );
    server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: SANDBOX_VA_NAME },
      spec: {
        attacher: driverName,
        nodeName: config.nodeName,
        source: { persistentVolumeName: SANDBOX_PV_NAME },
      },
    });
    timeline.line(
      "sandbox",
      `create volumeattachments/${SANDBOX_VA_NAME} (${SANDBOX_PV_NAME} on node ${config.nodeName})`,
    );

    const results: string[] = [];
    const failures: string[] = [];
    const step = async <T>(check: () => T | undefined) => {
      const limit = deadline(config.waitTimeoutMs);
      try {
        const result = await waitForState(server, check, limit.signal, ended.signal);
        await activity.settled(AbortSignal.any([limit.signal, ended.signal]));
        return result;
      } finally {
        limit.cancel();
      }
    };
    const waitFailure = (what: string, failure: WaitFailure) => {
      failures.push(what);
      return failure.why === "timeout"
        ? `${what}: not done within ${config.waitTimeoutMs / 1000}s`
        : `${what}: the attacher stopped${
          exitRequested === undefined ? "" : ` (exit status ${exitRequested})`
        }`;
    };

    // Attach.
    const attach = await step(() => {
      const va = server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, SANDBOX_VA_NAME);
      if (va?.status?.attached === true) {
        return { attached: true as const, metadata: va.status.attachmentMetadata ?? {} };
      }
      const message = va?.status?.attachError?.message;
      return message === undefined ? undefined : { attached: false as const, message };
    });
    if (!attach.ok) {
      results.push(waitFailure("Attach", attach));
    } else if (attach.value.attached) {
      results.push(
        `Attached: ${SANDBOX_VA_NAME} has status.attached=true, attachmentMetadata=${
          showValue(attach.value.metadata)
        }`,
      );
    } else {
      failures.push("attach error");
      results.push(`Attach failed: status.attachError.message: ${attach.value.message}`);
    }
    for (const line of results.splice(0)) write(line);

    // Detach.
    if (!ended.signal.aborted && server.find(VOLUME_ATTACHMENTS, SANDBOX_VA_NAME) !== undefined) {
      server.delete(VOLUME_ATTACHMENTS, SANDBOX_VA_NAME);
      timeline.line("sandbox", `delete volumeattachments/${SANDBOX_VA_NAME}`);
      const detach = await step(() => {
        const va = server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, SANDBOX_VA_NAME);
        if (va === undefined) return { gone: true as const };
        const message = va.status?.detachError?.message;
        return message === undefined ? undefined : { gone: false as const, message };
      });
      if (!detach.ok) {
        results.push(waitFailure("Detach", detach));
      } else if (!detach.value.gone) {
        failures.push("detach error");
        results.push(`Detach failed: status.detachError.message: ${detach.value.message}`);
      } else if (builtIn !== undefined && builtIn.isPublished(config.volumeHandle, config.nodeId)) {
        failures.push("still published");
        results.push(`Detach failed: the driver still publishes ${config.volumeHandle}`);
      } else {
        results.push(
          builtIn === undefined
            ? `Detached: ${SANDBOX_VA_NAME} is gone (its finalizer was removed after ControllerUnpublishVolume)`
            : `Detached: ${SANDBOX_VA_NAME} is gone and the driver publishes nothing`,
        );
      }
      for (const line of results.splice(0)) write(line);
    }

    // Release the PV.
    if (!ended.signal.aborted) {
      server.delete(PERSISTENT_VOLUMES, SANDBOX_PV_NAME);
      timeline.line("sandbox", `delete persistentvolumes/${SANDBOX_PV_NAME}`);
      const release = await step(() =>
        server.find(PERSISTENT_VOLUMES, SANDBOX_PV_NAME) === undefined ? true : undefined
      );
      if (!release.ok) {
        results.push(waitFailure("PersistentVolume release", release));
      } else {
        results.push(`Released: ${SANDBOX_PV_NAME} is gone (the attacher removed its finalizer)`);
      }
      for (const line of results.splice(0)) write(line);
    }

    // Stop the attacher (with leader election it releases the lease) before the verdict, so
    // that its last requests are part of the timeline.
    if (!ended.signal.aborted) timeline.line("sandbox", "stop the attacher");
    stop.abort();
    await running.catch(() => {});
    if (startError !== undefined) {
      failures.push("attacher error");
      write(`The attacher failed: ${errorText(startError)}`);
    }
    report.exitCode = failures.length === 0 ? 0 : 1;
    write(
      failures.length === 0 ? "Outcome: OK" : `Outcome: FAILED (${failures.join(", ")})`,
    );
    return report;
  } finally {
    stop.abort();
    if (running !== undefined) await running.catch(() => {});
    for (const client of clients) await client.close();
    report.requests = [...server.requests];
    if (builtIn !== undefined) report.publications = builtIn.publications();
    await driverServer?.close();
    await server.close();
    if (dir !== undefined) await Deno.remove(dir, { recursive: true });
  }
}
