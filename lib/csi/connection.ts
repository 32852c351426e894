/**
 * Connecting to the CSI driver at startup, as csi-lib-utils' `connection.Connect` and `rpc`
 * helpers do (csi-lib-utils `connection/connection.go`; external-attacher
 * `cmd/csi-attacher/main.go`): wait for the socket, watch for connection
 * loss, probe until ready, read the driver name and the capabilities.
 *
 * Nothing here exits the process: failures are thrown and connection loss is reported through a
 * callback, and `main.ts` decides.
 *
 * @module
 */

import { errorText } from "../errors.ts";
import { type CsiClient, CsiError } from "./api.ts";
import { type CsiCallObserver, GrpcCsiClient } from "./client.ts";
import { type Clock, realClock } from "../clock.ts";
import type { Logger } from "../observe/logger.ts";
import type { GrpcChannel } from "../wire/grpc/channel.ts";
import { GrpcCode } from "../wire/grpc/status.ts";
import { parseAddress } from "../wire/grpc/address.ts";

/** Options of {@link connect}. */
export interface ConnectOptions {
  log: Logger;
  /** Drives the overall timeout and the "Still connecting" lines. */
  clock: Clock;
  /** How long to wait for the first connection, in ms. Default 30 000 (csi-lib-utils). */
  timeoutMs?: number;
  /** Interval of the "Still connecting to CSI driver" lines, in ms. Default 10 000. */
  logIntervalMs?: number;
  /**
   * Called once when the connection, once established, is lost (the driver closed it or went
   * away). Not called after the client is closed. The attacher writes its termination message
   * and exits with status 1 here.
   */
  onConnectionLoss?: () => void;
  /** `--max-grpc-log-length` for the client. */
  maxGrpcLogLength?: number;
  /** Told about every call of the client (the metrics). */
  observer?: CsiCallObserver;
  /** Delay between connection attempts, in ms (default 1000). */
  reconnectBackoffMs?: number;
}

/**
 * Connects to the CSI driver at `address` (see {@link import("./client.ts").csiTarget}) and
 * waits until the connection is up, logging "Still connecting to CSI driver" every
 * `logIntervalMs`.
 *
 * Unlike csi-lib-utils, connection loss is detected for TCP addresses too (Go rejects
 * `OnConnectionLoss` with a non-unix address). A driver's graceful shutdown (HTTP/2 GOAWAY) is a
 * loss as well as a closed socket.
 *
 * @returns a connected client; the caller closes it.
 * @throws {Error} when no connection was made within `timeoutMs` (the client is then closed).
 */
export async function connect(address: string, options: ConnectOptions): Promise<GrpcCsiClient> {
  const { log, clock } = options;
  const client = new GrpcCsiClient({ log, clock }, {
    address,
    maxGrpcLogLength: options.maxGrpcLogLength,
    observer: options.observer,
    reconnectBackoffMs: options.reconnectBackoffMs,
  });
  log.v(5).info("Connecting to CSI driver", { address });
  try {
    await waitForReady(client.channel, {
      address,
      log,
      clock,
      timeoutMs: options.timeoutMs ?? 30_000,
      logIntervalMs: options.logIntervalMs ?? 10_000,
    });
  } catch (err) {
    client.close();
    throw err;
  }
  log.v(5).info("Connected to CSI driver", { address });
  if (options.onConnectionLoss !== undefined) watchForLoss(client, options.onConnectionLoss);
  return client;
}

function waitForReady(
  channel: GrpcChannel,
  opts: { address: string; log: Logger; clock: Clock; timeoutMs: number; logIntervalMs: number },
): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      timeout.cancel();
      ticker.cancel();
      unsubscribe();
      if (err) reject(err);
      else resolve();
    };
    const seconds = opts.timeoutMs / 1000;
    // The cause of the last failed attempt: logged when it first appears or changes, carried by
    // every "Still connecting" line and by the final error, so that an unreadable socket says
    // "permission denied" at once instead of a bare timeout 30 s later.
    let cause: string | undefined;
    const timeout = opts.clock.setTimer(opts.timeoutMs, () => {
      const message =
        `timed out after ${seconds}s waiting to connect to the CSI driver at ${opts.address}`;
      finish(new Error(cause === undefined ? message : `${message}: last error: ${cause}`));
    });
    let ticker = { cancel() {} };
    const scheduleLog = () => {
      ticker = opts.clock.setTimer(opts.logIntervalMs, () => {
        opts.log.info("Still connecting to CSI driver", {
          address: opts.address,
          ...(cause === undefined ? {} : { err: cause }),
        });
        scheduleLog();
      });
    };
    scheduleLog();
    // A failed attempt is retried by the channel after its backoff; a lost one leaves it IDLE,
    // from where it is asked again.
    const check = () => {
      if (done) return;
      const state = channel.state;
      if (state === "READY") {
        finish();
      } else if (state === "SHUTDOWN") {
        finish(new Error(`the connection to the CSI driver at ${opts.address} was closed`));
      } else if (state === "IDLE") {
        channel.connect();
      } else if (state === "TRANSIENT_FAILURE") {
        const failure = channel.lastError;
        if (failure === undefined) return;
        const text = dialFailureText(failure.details, opts.address);
        if (text === cause) return;
        cause = text;
        opts.log.info("Failed to connect to CSI driver, retrying", {
          address: opts.address,
          err: text,
          ...hintFor(text),
        });
      }
    };
    const unsubscribe = channel.onStateChange(check);
    check();
  });
}

/**
 * The cause of a failed attempt, from the channel's status details (`connection error: desc =
 * "transport: Error while dialing: dial unix /csi/csi.sock: connect: permission denied"`, as
 * grpc-go words it) without the gRPC wrapping. A unix path that exists but is not a socket is
 * refused by the kernel (ECONNREFUSED, as for a socket nobody listens on); the path's type is
 * added then, since that is a deployment mistake rather than a driver not yet up.
 */
function dialFailureText(details: string, address: string): string {
  const match = /^connection error: desc = "transport: (?:Error while dialing: )?(.*)"$/s.exec(
    details,
  );
  const text = match?.[1] ?? details;
  if (!text.endsWith("connection refused")) return text;
  let path: string;
  try {
    const parsed = parseAddress(address);
    if (parsed.transport !== "unix") return text;
    path = parsed.path;
  } catch {
    return text;
  }
  try {
    const info = Deno.statSync(path);
    if (info.isSocket) return text;
    const kind = info.isDirectory ? "a directory" : info.isFile ? "a regular file" : "not a file";
    return `${text} (${path} is ${kind}, not a socket)`;
  } catch {
    return text;
  }
}

/**
 * What to do about a permission error: the image runs as a non-root user, while most drivers
 * create their socket as root with mode 0755 (README, "Replacing the Go sidecar").
 */
function hintFor(cause: string): Record<string, string> {
  if (!cause.endsWith("permission denied")) return {};
  return {
    hint: "the socket is not writable by this container's user: run the container as the " +
      "socket's owner (securityContext.runAsUser: 0, as the Go sidecar's image runs), or have " +
      "the driver make the socket writable by a group the container runs in (runAsGroup)",
  };
}

/**
 * Calls `onLoss` once when the channel leaves READY for a reason other than {@link
 * GrpcCsiClient.close}: the driver closed the connection, went away or sent GOAWAY.
 * csi-lib-utils has the same rule in its dialer: any new dial after the first successful one
 * means the connection was lost.
 */
function watchForLoss(client: GrpcCsiClient, onLoss: () => void): void {
  const unsubscribe = client.channel.onStateChange((state, previous) => {
    if (state === "SHUTDOWN" || client.closed) {
      unsubscribe();
      return;
    }
    if (previous === "READY") {
      unsubscribe();
      onLoss();
    }
  });
}

/** Options of {@link probeForever}. */
export interface ProbeOptions {
  /** Timeout of one Probe call (`--timeout`), in ms. */
  timeoutMs: number;
  clock: Clock;
  log: Logger;
  /** Stops waiting; the promise then rejects. */
  signal?: AbortSignal;
}

/** Interval between probes (csi-lib-utils `probeInterval`). */
const PROBE_INTERVAL_MS = 1000;

/**
 * Probes the driver until it is ready, as csi-lib-utils' `ProbeForever`: at once, then every
 * second. `ready` absent or true ends the wait; `ready: false` and DeadlineExceeded keep waiting;
 * there is no overall limit.
 *
 * @throws {Error} `CSI driver probe failed: <err>` on any other error, gRPC or not.
 * @throws {Error} when `signal` aborts (the cause is the signal's reason).
 */
export async function probeForever(client: CsiClient, options: ProbeOptions): Promise<void> {
  const { clock, log, signal } = options;
  for (;;) {
    const startedAt = clock.now();
    log.info("Probing CSI driver for readiness");
    try {
      const res = await client.probe({ timeoutMs: options.timeoutMs });
      if (res.ready === undefined || res.ready) return;
      log.info("CSI driver is not ready");
    } catch (err) {
      if (!(err instanceof CsiError) || err.code !== GrpcCode.DeadlineExceeded) {
        throw new Error(`CSI driver probe failed: ${errorText(err)}`, { cause: err });
      }
      log.info("CSI driver probe timed out");
    }
    const waitMs = Math.max(0, PROBE_INTERVAL_MS - (clock.now() - startedAt));
    try {
      await clock.sleep(waitMs, signal);
    } catch (err) {
      throw new Error("gave up waiting for the CSI driver to become ready", { cause: err });
    }
  }
}

/** Timeout of the short startup calls (GetPluginInfo, capabilities), as in the Go attacher. */
export const STARTUP_CALL_TIMEOUT_MS = 1000;

/**
 * Reads the driver name with GetPluginInfo (1 s timeout).
 *
 * @throws {CsiError} when the call fails.
 * @throws {Error} `driver name is empty` when the driver returned no name.
 */
export async function getDriverName(client: CsiClient): Promise<string> {
  const info = await client.getPluginInfo({ timeoutMs: STARTUP_CALL_TIMEOUT_MS });
  if (info.name === "") throw new Error("driver name is empty");
  return info.name;
}

/** What the attacher needs to know about a driver's capabilities (external-attacher `cmd/csi-attacher/main.go`). */
export interface DriverCapabilities {
  /** Plugin capability CONTROLLER_SERVICE. Without it every other field is false. */
  controllerService: boolean;
  /** PUBLISH_UNPUBLISH_VOLUME: use the CSI handler (else the trivial handler). */
  publishUnpublish: boolean;
  /** PUBLISH_READONLY: otherwise `readonly` is always sent as false. */
  publishReadonly: boolean;
  /** SINGLE_NODE_MULTI_WRITER: selects the access-mode mapping. */
  singleNodeMultiWriter: boolean;
  /** LIST_VOLUMES. */
  listVolumes: boolean;
  /** LIST_VOLUMES_PUBLISHED_NODES (alone; see {@link reconcile}). */
  listVolumesPublishedNodes: boolean;
  /** ListVolumes-based reconciliation is possible: LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES. */
  reconcile: boolean;
}

/**
 * Calls GetPluginCapabilities and, only when the plugin has CONTROLLER_SERVICE,
 * ControllerGetCapabilities; both share one 1 s budget, as in the Go attacher.
 *
 * @param clock measures the shared budget ({@link realClock} by default).
 * @throws {CsiError} when a call fails (the Go attacher exits; it does not retry).
 */
export async function getCapabilities(
  client: CsiClient,
  clock: Clock = realClock,
): Promise<DriverCapabilities> {
  const deadline = clock.now() + STARTUP_CALL_TIMEOUT_MS;
  const plugin = await client.getPluginCapabilities({ timeoutMs: STARTUP_CALL_TIMEOUT_MS });
  if (!plugin.has("CONTROLLER_SERVICE")) {
    return {
      controllerService: false,
      publishUnpublish: false,
      publishReadonly: false,
      singleNodeMultiWriter: false,
      listVolumes: false,
      listVolumesPublishedNodes: false,
      reconcile: false,
    };
  }
  const rpcs = await client.controllerGetCapabilities({
    timeoutMs: Math.max(0, deadline - clock.now()),
  });
  const listVolumes = rpcs.has("LIST_VOLUMES");
  const listVolumesPublishedNodes = rpcs.has("LIST_VOLUMES_PUBLISHED_NODES");
  return {
    controllerService: true,
    publishUnpublish: rpcs.has("PUBLISH_UNPUBLISH_VOLUME"),
    publishReadonly: rpcs.has("PUBLISH_READONLY"),
    singleNodeMultiWriter: rpcs.has("SINGLE_NODE_MULTI_WRITER"),
    listVolumes,
    listVolumesPublishedNodes,
    reconcile: listVolumes && listVolumesPublishedNodes,
  };
}
