/**
 * {@link CsiClient} over our own gRPC channel ({@link GrpcChannel}: HTTP/2 and HPACK in
 * `../wire/http2/`, messages by `../wire/grpc/protowire.ts`): the Identity and Controller calls
 * the attacher makes, with per-call deadlines, Go-style error texts, V(5) call logging and a
 * metrics observer.
 *
 * @module
 */

import {
  type CallOptions,
  type ControllerPublishVolumeRequest,
  type ControllerUnpublishVolumeRequest,
  type CsiClient,
  CsiError,
  type ListVolumesPage,
} from "./api.ts";
import { type Clock, realClock } from "../clock.ts";
import { errorText } from "../errors.ts";
import { type CsiMethod, csiMethod, type CsiServiceName } from "./schema.ts";

import { logGrpcRequest, logGrpcResult } from "./grpc_log.ts";
import { decodeListVolumesAnswer } from "./list_volumes_answer.ts";
import { DEADLINE_DETAILS, GrpcChannel } from "../wire/grpc/channel.ts";
import { FencedError } from "../lease_fence.ts";
import type { Http2SessionOptions } from "../wire/http2/session.ts";
import { decodeMessage, encodeMessage } from "../wire/grpc/protowire.ts";
import { GrpcCode, grpcCodeName, GrpcStatusError } from "../wire/grpc/status.ts";
import type { Logger } from "../observe/logger.ts";

/**
 * What a {@link GrpcCsiClient} tells about its calls, as csi-lib-utils' connection hands each
 * call to its `MetricsManager` (`connection/connection.go` `LogGRPC`, `metrics/metrics.go`
 * `RecordMetrics`). The attacher's metrics implement it.
 */
export interface CsiCallObserver {
  /** One finished call, successful or not. A throw is logged, never passed to the caller. */
  observeCsiCall(info: CsiCallInfo): void;
}

/** What a finished call reports to {@link CsiCallObserver.observeCsiCall}. */
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
  /**
   * Measures call durations and runs call deadlines and the reconnect backoff;
   * {@link realClock} by default.
   */
  clock?: Clock;
}

/** Options of {@link GrpcCsiClient}. */
export interface GrpcCsiClientOptions {
  /** `--csi-address`: a path (`/run/csi/socket`), a `unix:` URI or `host:port`. */
  address: string;
  /** `--max-grpc-log-length`: cap on logged responses, ≤ 0 for none. Default -1. */
  maxGrpcLogLength?: number;
  /** Told about every finished call; none when absent. */
  observer?: CsiCallObserver;
  /**
   * Delay between connection attempts, in ms. Default 1000: csi-lib-utils caps its reconnect
   * backoff at 1 s.
   */
  reconnectBackoffMs?: number;
  /** HTTP/2 flow-control windows; the defaults suit (tests use small ones). */
  http2?: Http2SessionOptions;
}

/** The `grpc_status_code` of a call that failed without a gRPC status (csi-lib-utils). */
const UNKNOWN_NON_GRPC = "unknown-non-grpc";

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
 * {@link CsiError} (or {@link FencedError} when `opts.fence` refused to send the request); a call
 * whose deadline (`opts.timeoutMs`) expires rejects with code DeadlineExceeded and the message
 * `rpc error: code = DeadlineExceeded desc = context deadline exceeded`, as in Go.
 *
 * @throws {Error} from the constructor when `options.address` is not a valid address.
 */
export class GrpcCsiClient implements CsiClient {
  #log: Logger;
  #clock: Clock;
  #channel: GrpcChannel;
  #maxGrpcLogLength: number;
  #observer: CsiCallObserver | undefined;
  #methods = new Map<string, CsiMethod>();
  #closed = false;

  constructor(deps: GrpcCsiClientDeps, options: GrpcCsiClientOptions) {
    this.#log = deps.log;
    this.#clock = deps.clock ?? realClock;
    this.#maxGrpcLogLength = options.maxGrpcLogLength ?? -1;
    this.#observer = options.observer;
    this.#channel = new GrpcChannel(options.address, {
      backoffMs: options.reconnectBackoffMs ?? 1000,
      clock: this.#clock,
      ...(options.http2 === undefined ? {} : { session: options.http2 }),
    });
  }

  /** The underlying channel, for connectivity watching. */
  get channel(): GrpcChannel {
    return this.#channel;
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
   * The answer is read straight from its bytes (`list_volumes_answer.ts`).
   */
  async listVolumes(
    req: { maxEntries: number; startingToken: string },
    opts: CallOptions,
  ): Promise<ListVolumesPage> {
    const size = { bytes: 0 };
    const page = await this.#call<Omit<ListVolumesPage, "bytes">>(
      "Controller",
      "ListVolumes",
      req,
      opts,
      size,
      decodeListVolumesAnswer,
    );
    return { entries: page.entries, nextToken: page.nextToken, bytes: size.bytes };
  }

  /** Closes the channel; calls in flight fail with Unavailable. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#channel.close();
  }

  #method(service: CsiServiceName, name: string): CsiMethod {
    const key = `${service}/${name}`;
    let method = this.#methods.get(key);
    if (method === undefined) {
      method = csiMethod(service, name);
      this.#methods.set(key, method);
    }
    return method;
  }

  async #call<Res>(
    service: CsiServiceName,
    name: string,
    request: object,
    opts: CallOptions,
    size?: { bytes: number },
    decode?: (reply: Uint8Array) => object,
  ): Promise<Res> {
    const method = this.#method(service, name);
    logGrpcRequest(this.#log, method, request);
    const startedAt = this.#clock.now();
    const deadlineMs = startedAt + opts.timeoutMs;
    try {
      const response = await this.#invoke(method, request, opts, size, decode);
      this.#report(method, "OK", startedAt, opts);
      logGrpcResult(this.#log, method, { response }, this.#maxGrpcLogLength);
      return response as Res;
    } catch (err) {
      if (err instanceof FencedError) {
        // Never sent: not a call of the driver's, so not in the call metrics.
        logGrpcResult(this.#log, method, { error: err }, this.#maxGrpcLogLength);
        throw err;
      }
      const csiErr = toCsiError(err, this.#clock.now() >= deadlineMs - 5);
      this.#report(
        method,
        csiErr.code === undefined ? UNKNOWN_NON_GRPC : grpcCodeName(csiErr.code),
        startedAt,
        opts,
      );
      logGrpcResult(this.#log, method, { error: csiErr }, this.#maxGrpcLogLength);
      throw csiErr;
    }
  }

  async #invoke(
    method: CsiMethod,
    request: object,
    opts: CallOptions,
    size?: { bytes: number },
    decode: (reply: Uint8Array) => object = (reply) => decodeMessage(method.responseType, reply),
  ): Promise<object> {
    let bytes: Uint8Array;
    try {
      bytes = encodeMessage(method.requestType, request);
    } catch (err) {
      throw new CsiError(undefined, `cannot encode ${method.name} request: ${errorText(err)}`, {
        cause: err,
      });
    }
    const reply = await this.#channel.unary(method.path, bytes, opts.timeoutMs, opts.fence);
    if (size !== undefined) size.bytes = reply.length;
    try {
      return decode(reply);
    } catch (err) {
      // grpc-go: a response that does not parse is Internal.
      throw new CsiError(
        GrpcCode.Internal,
        `grpc: failed to unmarshal the received message: ${errorText(err)}`,
        { cause: err },
      );
    }
  }

  #report(method: CsiMethod, code: string, startedAt: number, opts: CallOptions): void {
    if (this.#observer === undefined) return;
    const info: CsiCallInfo = {
      method: method.path,
      code,
      seconds: Math.max(0, this.#clock.now() - startedAt) / 1000,
    };
    if (opts.migrated !== undefined) info.migrated = opts.migrated;
    try {
      this.#observer.observeCsiCall(info);
    } catch (err) {
      this.#log.error(err, "CSI call observer failed", { method: method.path });
    }
  }
}

/**
 * Makes any failure a {@link CsiError}: a gRPC status keeps its code and details, except that
 * DeadlineExceeded at or after our own deadline (`pastDeadline`) reads `context deadline
 * exceeded` as in Go (the server may answer DeadlineExceeded itself when the `grpc-timeout` we
 * sent runs out; before our deadline, its text is kept); anything else gets code undefined.
 */
function toCsiError(err: unknown, pastDeadline: boolean): CsiError {
  if (err instanceof GrpcStatusError) {
    if (err.code === GrpcCode.DeadlineExceeded && pastDeadline) {
      return new CsiError(GrpcCode.DeadlineExceeded, DEADLINE_DETAILS);
    }
    return new CsiError(err.code, err.details);
  }
  if (err instanceof CsiError) return err;
  return new CsiError(undefined, errorText(err), { cause: err });
}
