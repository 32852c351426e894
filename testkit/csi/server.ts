/**
 * A CSI driver gRPC server: the Identity service and the Controller RPCs the attacher uses,
 * answered by async handler functions. Used by the example driver (sandbox demo) and by tests.
 *
 * Handlers receive requests in camelCase with every field present (proto3 defaults filled in;
 * an absent message field is `null`; a oneof has only its set member, e.g.
 * `volumeCapability.block` or `volumeCapability.mount`). They return the response in the same
 * form, or throw {@link CsiStatusError} to answer with a gRPC status; any other thrown error is
 * answered with Unknown (2), as grpc-go does for non-status errors.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import type { AccessModeName, ControllerUnpublishVolumeRequest } from "../../lib/csi/api.ts";
import { CSI_SERVER_LOADER_OPTIONS, loadCsiProto } from "./proto_loader.ts";

/** An error a handler throws to answer with gRPC status `code` and `message` as details. */
export class CsiStatusError extends Error {
  /** gRPC status code, 1–16. */
  readonly code: number;

  /** @throws {RangeError} when `code` is not an error status (1–16). */
  constructor(code: number, message: string, options?: ErrorOptions) {
    if (!Number.isInteger(code) || code < 1 || code > 16) {
      throw new RangeError(`not a gRPC error status code: ${code}`);
    }
    super(message, options);
    this.name = "CsiStatusError";
    this.code = code;
  }
}

/** `csi.v1.ControllerPublishVolumeRequest` as a driver receives it. */
export interface DriverPublishRequest {
  volumeId: string;
  nodeId: string;
  /** `null` when the CO sent none. */
  volumeCapability: DriverVolumeCapability | null;
  readonly: boolean;
  secrets: Record<string, string>;
  volumeContext: Record<string, string>;
}

/** `csi.v1.VolumeCapability` as a driver receives it. */
export interface DriverVolumeCapability {
  block?: Record<string, never>;
  mount?: { fsType: string; mountFlags: string[]; volumeMountGroup: string };
  /** `null` when the CO sent none. */
  accessMode: { mode: AccessModeName } | null;
}

/** `csi.v1.PluginCapability`: one of the members. */
export interface PluginCapabilityMessage {
  service?: { type: string };
  volumeExpansion?: { type: string };
}

/** `csi.v1.ControllerServiceCapability`. */
export interface ControllerCapabilityMessage {
  rpc?: { type: string };
}

/** `csi.v1.ListVolumesResponse.Entry` as a driver sends it. */
export interface ListVolumesEntryMessage {
  volume: {
    volumeId: string;
    /** int64; a decimal string or a safe integer. */
    capacityBytes?: string | number;
    volumeContext?: Record<string, string>;
  } | null;
  status?: {
    publishedNodeIds: string[];
  } | null;
}

/** What a handler learns about the call besides its request. */
export interface CallContext {
  /**
   * Milliseconds from the call's arrival to the deadline the client sent (`grpc-timeout`), or
   * `Infinity` when it sent none.
   */
  timeoutMs: number;
}

/** Identity service handlers. A missing handler answers Unimplemented (12). */
export interface IdentityHandlers {
  getPluginInfo?(
    request: Record<string, never>,
    call?: CallContext,
  ): Promise<{ name: string; vendorVersion: string; manifest?: Record<string, string> }>;
  getPluginCapabilities?(
    request: Record<string, never>,
    call?: CallContext,
  ): Promise<{ capabilities: PluginCapabilityMessage[] }>;
  /** `ready` is a `google.protobuf.BoolValue`: omit it or send `null` for "absent". */
  probe?(
    request: Record<string, never>,
    call?: CallContext,
  ): Promise<{ ready?: { value: boolean } | null }>;
}

/** Controller service handlers. A missing handler answers Unimplemented (12). */
export interface ControllerHandlers {
  controllerPublishVolume?(
    request: DriverPublishRequest,
    call?: CallContext,
  ): Promise<{ publishContext?: Record<string, string> }>;
  controllerUnpublishVolume?(
    request: ControllerUnpublishVolumeRequest,
    call?: CallContext,
  ): Promise<void>;
  listVolumes?(
    request: { maxEntries: number; startingToken: string },
    call?: CallContext,
  ): Promise<{ entries: ListVolumesEntryMessage[]; nextToken?: string }>;
  controllerGetCapabilities?(
    request: Record<string, never>,
    call?: CallContext,
  ): Promise<{ capabilities: ControllerCapabilityMessage[] }>;
}

/** Options of {@link startCsiDriverServer}. */
export interface CsiDriverServerOptions {
  /**
   * A unix socket path (absolute; a stale socket file there is replaced) or `host:port` such as
   * `127.0.0.1:0` (port 0 picks a free port).
   */
  address: string;
  identity: IdentityHandlers;
  controller?: ControllerHandlers;
}

/** A running driver server. */
export interface CsiDriverServer {
  /** Where clients connect: the socket path, or `host:port` with the bound port. */
  readonly address: string;
  /** Stops the server at once; calls in flight are cancelled. Idempotent. */
  close(): Promise<void>;
  /**
   * Stops the server gracefully, as grpc-go's `GracefulStop`: HTTP/2 GOAWAY on open
   * connections, calls in flight finish, then the connections close. Idempotent.
   */
  shutdown(): Promise<void>;
}

/** Handler name → proto method name, per service. */
const IDENTITY_METHODS = {
  getPluginInfo: "GetPluginInfo",
  getPluginCapabilities: "GetPluginCapabilities",
  probe: "Probe",
} as const;

const CONTROLLER_METHODS = {
  controllerPublishVolume: "ControllerPublishVolume",
  controllerUnpublishVolume: "ControllerUnpublishVolume",
  listVolumes: "ListVolumes",
  controllerGetCapabilities: "ControllerGetCapabilities",
} as const;

/**
 * Starts a CSI driver server on `options.address`.
 *
 * @throws {Error} when binding fails (e.g. the path exists and is not a socket).
 *
 * @example
 * ```ts ignore
 * const server = await startCsiDriverServer({
 *   address: "/tmp/csi/csi.sock",
 *   identity: { getPluginInfo: () => Promise.resolve({ name: "x.csi.io", vendorVersion: "1" }) },
 * });
 * await server.close();
 * ```
 */
export async function startCsiDriverServer(
  options: CsiDriverServerOptions,
): Promise<CsiDriverServer> {
  const proto = loadCsiProto(CSI_SERVER_LOADER_OPTIONS);
  const server = new grpc.Server();
  server.addService(proto.services.Identity, implementation(options.identity, IDENTITY_METHODS));
  server.addService(
    proto.services.Controller,
    implementation(options.controller ?? {}, CONTROLLER_METHODS),
  );
  const isUnix = options.address.startsWith("/");
  if (isUnix) await removeStaleSocket(options.address);
  const target = isUnix ? `unix://${options.address}` : options.address;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, boundPort) => {
      if (err) {
        reject(new Error(`cannot listen on ${options.address}: ${err.message}`, { cause: err }));
      } else resolve(boundPort);
    });
  });
  const address = isUnix ? options.address : `${options.address.replace(/:\d+$/, "")}:${port}`;
  let closed = false;
  return {
    address,
    close() {
      if (!closed) {
        closed = true;
        server.forceShutdown();
      }
      return Promise.resolve();
    },
    shutdown() {
      if (closed) return Promise.resolve();
      closed = true;
      return new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    },
  };
}

function implementation(
  handlers: object,
  methods: Readonly<Record<string, string>>,
): grpc.UntypedServiceImplementation {
  const impl: grpc.UntypedServiceImplementation = {};
  for (const [handlerName, methodName] of Object.entries(methods)) {
    const handler = (handlers as Record<string, unknown>)[handlerName];
    if (typeof handler !== "function") continue; // grpc-js answers Unimplemented
    impl[methodName] = (
      call: grpc.ServerUnaryCall<unknown, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) => {
      let result: Promise<unknown>;
      try {
        result = Promise.resolve(handler.call(handlers, call.request, callContext(call)));
      } catch (err) {
        result = Promise.reject(err);
      }
      result.then(
        (response) => callback(null, response ?? {}),
        (err: unknown) => callback(toStatus(err)),
      );
    };
  }
  return impl;
}

function callContext(call: grpc.ServerUnaryCall<unknown, unknown>): CallContext {
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return { timeoutMs: Number.isFinite(at) ? at - Date.now() : Infinity };
}

function toStatus(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof CsiStatusError) return { code: err.code, details: err.message };
  return { code: grpc.status.UNKNOWN, details: err instanceof Error ? err.message : String(err) };
}

async function removeStaleSocket(path: string): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  if (info.isSocket) await Deno.remove(path);
}
