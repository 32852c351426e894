/**
 * {@link CsiClient} over `@grpc/grpc-js`: the Identity and Controller calls the attacher makes,
 * with per-call deadlines, Go-style error texts, V(5) call logging and a metrics observer.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import {
  type CallOptions,
  type ControllerPublishVolumeRequest,
  type ControllerUnpublishVolumeRequest,
  type CsiClient,
  CsiError,
  grpcCodeName,
  type ListedVolume,
} from "./api.ts";
import { type Clock, realClock } from "../clock.ts";
import { type CsiMethod, type CsiServiceName, loadCsiProto } from "./proto.ts";
import { logGrpcRequest, logGrpcResult } from "./grpc_log.ts";
import type { Logger } from "../observe/logger.ts";

/** What a finished call reports to {@link GrpcCsiClientOptions.onCall} (for metrics). */
export interface CsiCallInfo {
  /** Full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume`. */
  method: string;
  /** Go name of the status code (`OK`, `DeadlineExceeded`, …) or `unknown-non-grpc`. */
  code: string;
  /** Duration of the call. */
  seconds: number;
  /** The call's {@link CallOptions.migrated}, when given. */
  migrated?: boolean;
}

/** Dependencies of {@link GrpcCsiClient}. */
export interface GrpcCsiClientDeps {
  log: Logger;
  /** Measures call durations; {@link realClock} by default. Deadlines always use real time. */
  clock?: Clock;
}

/** Options of {@link GrpcCsiClient}. */
export interface GrpcCsiClientOptions {
  /** `--csi-address`: a path (`/run/csi/socket`), a `unix:` URI or `host:port`. */
  address: string;
  /** `--max-grpc-log-length`: cap on logged responses, ≤ 0 for none. Default -1. */
  maxGrpcLogLength?: number;
  /** Called once per finished call, successful or not. Must not throw. */
  onCall?: (info: CsiCallInfo) => void;
  /**
   * Delay between connection attempts, in ms. Default 1000: csi-lib-utils caps its reconnect
   * backoff at 1 s.
   */
  reconnectBackoffMs?: number;
}

/** grpc-js' longest timer; used as the idle timeout, which grpc-js cannot switch off. */
export const MAX_IDLE_TIMEOUT_MS = 2_147_483_647;

/** The text Go's gRPC gives a call whose client-side deadline expired. */
const DEADLINE_DETAILS = "context deadline exceeded";

/**
 * Turns `--csi-address` into a gRPC target as csi-lib-utils does: a path starting with `/`
 * becomes `unix://<path>`; anything else (`unix:…`, `host:port`) is used as it is.
 *
 * @example
 * ```ts
 * import { csiTarget } from "./client.ts";
 * csiTarget("/run/csi/socket"); // "unix:///run/csi/socket"
 * csiTarget("127.0.0.1:10000"); // "127.0.0.1:10000"
 * ```
 */
export function csiTarget(address: string): string {
  return address.startsWith("/") ? `unix://${address}` : address;
}

/**
 * A CSI client on one gRPC channel shared by the Identity and Controller services.
 *
 * Construction does no I/O: the channel connects on the first call or when
 * {@link import("./connection.ts").connect} asks it to. Every method rejects with
 * {@link CsiError}; a call whose deadline (`opts.timeoutMs`) expires rejects with code 4 and the
 * message `rpc error: code = DeadlineExceeded desc = context deadline exceeded`, as in Go.
 */
export class GrpcCsiClient implements CsiClient {
  #log: Logger;
  #clock: Clock;
  #client: grpc.Client;
  #maxGrpcLogLength: number;
  #onCall: ((info: CsiCallInfo) => void) | undefined;
  #methods = new Map<string, CsiMethod>();
  #proto = loadCsiProto();
  #activeCalls = 0;
  #lastActivityMs: number;
  #closed = false;

  constructor(deps: GrpcCsiClientDeps, options: GrpcCsiClientOptions) {
    this.#log = deps.log;
    this.#clock = deps.clock ?? realClock;
    this.#maxGrpcLogLength = options.maxGrpcLogLength ?? -1;
    this.#onCall = options.onCall;
    const backoffMs = options.reconnectBackoffMs ?? 1000;
    this.#client = new grpc.Client(csiTarget(options.address), grpc.credentials.createInsecure(), {
      "grpc.initial_reconnect_backoff_ms": backoffMs,
      "grpc.max_reconnect_backoff_ms": backoffMs,
      "grpc.client_idle_timeout_ms": MAX_IDLE_TIMEOUT_MS,
    });
    this.#lastActivityMs = performance.now();
  }

  /** The underlying channel, for connectivity watching. */
  get channel(): grpc.ChannelInterface {
    return this.#client.getChannel();
  }

  /** Number of calls in flight. */
  get activeCalls(): number {
    return this.#activeCalls;
  }

  /**
   * Monotonic time (ms, `performance.now()`) of the last call start or end, or of construction:
   * grpc-js's idle timer runs on real time, so this is compared with `performance.now()`.
   */
  get lastActivityMs(): number {
    return this.#lastActivityMs;
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  async probe(opts: CallOptions): Promise<{ ready?: boolean }> {
    const res = await this.#call<{ ready: { value: boolean } | null }>(
      "Identity",
      "Probe",
      {},
      opts,
    );
    return res.ready === null || res.ready === undefined ? {} : { ready: res.ready.value };
  }

  async getPluginInfo(opts: CallOptions): Promise<{ name: string; vendorVersion: string }> {
    const res = await this.#call<{ name: string; vendorVersion: string }>(
      "Identity",
      "GetPluginInfo",
      {},
      opts,
    );
    return { name: res.name, vendorVersion: res.vendorVersion };
  }

  /** Service capability types; volume-expansion and empty entries are skipped. */
  async getPluginCapabilities(opts: CallOptions): Promise<Set<string>> {
    const res = await this.#call<
      { capabilities: { service?: { type: string | number } | null }[] }
    >(
      "Identity",
      "GetPluginCapabilities",
      {},
      opts,
    );
    const types = new Set<string>();
    for (const cap of res.capabilities) {
      if (cap.service) types.add(String(cap.service.type));
    }
    return types;
  }

  /** RPC capability types; empty entries are skipped. */
  async controllerGetCapabilities(opts: CallOptions): Promise<Set<string>> {
    const res = await this.#call<{ capabilities: { rpc?: { type: string | number } | null }[] }>(
      "Controller",
      "ControllerGetCapabilities",
      {},
      opts,
    );
    const types = new Set<string>();
    for (const cap of res.capabilities) {
      if (cap.rpc) types.add(String(cap.rpc.type));
    }
    return types;
  }

  async controllerPublishVolume(
    req: ControllerPublishVolumeRequest,
    opts: CallOptions,
  ): Promise<{ publishContext: Record<string, string> }> {
    const res = await this.#call<{ publishContext?: Record<string, string> | null }>(
      "Controller",
      "ControllerPublishVolume",
      req,
      opts,
    );
    return { publishContext: res.publishContext ?? {} };
  }

  async controllerUnpublishVolume(
    req: ControllerUnpublishVolumeRequest,
    opts: CallOptions,
  ): Promise<void> {
    await this.#call("Controller", "ControllerUnpublishVolume", req, opts);
  }

  /**
   * One page of ListVolumes. Entries without `volume` or without `status` are left out, as the
   * Go attacher's reconciler skips them; `publishedNodeIds` is `[]` when the status lists none.
   */
  async listVolumes(
    req: { maxEntries: number; startingToken: string },
    opts: CallOptions,
  ): Promise<{ entries: ListedVolume[]; nextToken: string }> {
    const res = await this.#call<{
      entries: {
        volume?: { volumeId: string } | null;
        status?: { publishedNodeIds?: string[] } | null;
      }[];
      nextToken: string;
    }>("Controller", "ListVolumes", req, opts);
    const entries: ListedVolume[] = [];
    for (const entry of res.entries) {
      if (!entry.volume || !entry.status) continue;
      entries.push({
        volumeId: entry.volume.volumeId,
        publishedNodeIds: [...(entry.status.publishedNodeIds ?? [])],
      });
    }
    return { entries, nextToken: res.nextToken };
  }

  /** Closes the channel; calls in flight fail with Unavailable (14). Idempotent. */
  close(): void {
    this.#closed = true;
    this.#client.close();
  }

  #method(service: CsiServiceName, name: string): CsiMethod {
    const key = `${service}/${name}`;
    let method = this.#methods.get(key);
    if (method === undefined) {
      method = this.#proto.method(service, name);
      this.#methods.set(key, method);
    }
    return method;
  }

  async #call<Res>(
    service: CsiServiceName,
    name: string,
    request: object,
    opts: CallOptions,
  ): Promise<Res> {
    const method = this.#method(service, name);
    logGrpcRequest(this.#log, method, request);
    const startedAt = this.#clock.now();
    // grpc-js takes its deadline as wall time; whether it was ours that expired is judged on
    // the monotonic clock, which a wall clock step does not move.
    const wallDeadlineMs = Date.now() + opts.timeoutMs;
    const deadlineMs = performance.now() + opts.timeoutMs;
    this.#activeCalls++;
    this.#lastActivityMs = performance.now();
    try {
      const response = await this.#invoke(method, request, wallDeadlineMs);
      this.#report(method, "OK", startedAt, opts);
      logGrpcResult(this.#log, method, { response }, this.#maxGrpcLogLength);
      return response as Res;
    } catch (err) {
      const csiErr = toCsiError(err, deadlineMs);
      this.#report(
        method,
        csiErr.code === undefined ? "unknown-non-grpc" : grpcCodeName(csiErr.code),
        startedAt,
        opts,
      );
      logGrpcResult(this.#log, method, { error: csiErr }, this.#maxGrpcLogLength);
      throw csiErr;
    } finally {
      this.#activeCalls--;
      this.#lastActivityMs = performance.now();
    }
  }

  #invoke(method: CsiMethod, request: object, wallDeadlineMs: number): Promise<object> {
    return new Promise((resolve, reject) => {
      // makeUnaryRequest throws synchronously on a closed channel or a bad argument.
      try {
        this.#client.makeUnaryRequest(
          method.path,
          method.definition.requestSerialize,
          method.definition.responseDeserialize,
          request,
          new grpc.Metadata(),
          { deadline: wallDeadlineMs },
          (err, value) => {
            if (err) reject(err);
            else resolve(value ?? {});
          },
        );
      } catch (err) {
        reject(err);
      }
    });
  }

  #report(method: CsiMethod, code: string, startedAt: number, opts: CallOptions): void {
    if (this.#onCall === undefined) return;
    const info: CsiCallInfo = {
      method: method.path,
      code,
      seconds: Math.max(0, this.#clock.now() - startedAt) / 1000,
    };
    if (opts.migrated !== undefined) info.migrated = opts.migrated;
    try {
      this.#onCall(info);
    } catch (err) {
      this.#log.error(err, "CSI call observer failed", { method: method.path });
    }
  }
}

/**
 * Maps a grpc-js failure to {@link CsiError}: a gRPC status keeps its code and details, except
 * that an expired client-side deadline reads `context deadline exceeded` as in Go; anything else
 * gets code undefined.
 */
function toCsiError(err: unknown, deadlineMs: number): CsiError {
  // deadlineMs is on performance.now().
  if (isServiceError(err)) {
    // grpc-js words its own deadline expiry differently from Go ("Deadline exceeded after …").
    // A driver may also return DeadlineExceeded itself, before our deadline: keep its text then.
    const clientDeadline = err.code === grpc.status.DEADLINE_EXCEEDED &&
      performance.now() >= deadlineMs - 5;
    // A status is complete in its code and details, as Go's `status.Error`: grpc-js's own error
    // ("9 FAILED_PRECONDITION: …") is not kept as a cause, so error texts read as Go's.
    return new CsiError(err.code, clientDeadline ? DEADLINE_DETAILS : err.details);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new CsiError(undefined, message, { cause: err });
}

function isServiceError(err: unknown): err is grpc.ServiceError {
  return err instanceof Error && typeof (err as Partial<grpc.ServiceError>).code === "number" &&
    typeof (err as Partial<grpc.ServiceError>).details === "string";
}
