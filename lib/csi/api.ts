/**
 * The narrow seam between the attacher and a CSI driver: the Identity and Controller calls it
 * makes, with messages as camelCase objects (the proto's field names in camelCase).
 *
 * @module
 */

import { grpcCodeName } from "../wire/grpc/status.ts";
import { MAX_RECEIVE_MESSAGE_BYTES } from "../wire/grpc/response.ts";
import type { LeaseFence } from "../lease_fence.ts";

/**
 * The largest answer the client accepts from a driver: grpc-go's default receive limit, 4 MiB
 * (`defaultClientMaxReceiveMessageSize`, grpc-go `server.go`/`dialoptions.go`). A larger one
 * fails with ResourceExhausted `grpc: received message larger than max (<size> vs. <limit>)`.
 */
export const CSI_MAX_RECEIVE_MESSAGE_BYTES: number = MAX_RECEIVE_MESSAGE_BYTES;

/** `csi.v1.VolumeCapability.AccessMode.Mode` names. */
export type AccessModeName =
  | "UNKNOWN"
  | "SINGLE_NODE_WRITER"
  | "SINGLE_NODE_READER_ONLY"
  | "MULTI_NODE_READER_ONLY"
  | "MULTI_NODE_SINGLE_WRITER"
  | "MULTI_NODE_MULTI_WRITER"
  | "SINGLE_NODE_SINGLE_WRITER"
  | "SINGLE_NODE_MULTI_WRITER";

/** `csi.v1.VolumeCapability`: exactly one of `block` or `mount`. */
export interface VolumeCapability {
  block?: Record<string, never>;
  mount?: { fsType: string; mountFlags: string[]; volumeMountGroup?: string };
  accessMode: { mode: AccessModeName };
}

/** `csi.v1.ControllerPublishVolumeRequest`. */
export interface ControllerPublishVolumeRequest {
  volumeId: string;
  nodeId: string;
  volumeCapability: VolumeCapability;
  readonly: boolean;
  /** Marked `csi_secret` in the spec: never logged. */
  secrets: Record<string, string>;
  volumeContext: Record<string, string>;
}

/** `csi.v1.ControllerUnpublishVolumeRequest`. */
export interface ControllerUnpublishVolumeRequest {
  volumeId: string;
  nodeId: string;
  /** Marked `csi_secret` in the spec: never logged. */
  secrets: Record<string, string>;
}

/** One entry of `csi.v1.ListVolumesResponse`. */
export interface ListedVolume {
  volumeId: string;
  /** Shared between the entries of a page that list the same nodes: never changed. */
  publishedNodeIds: readonly string[];
}

/** One page of ListVolumes. */
export interface ListVolumesPage {
  entries: ListedVolume[];
  /** Empty on the last page. */
  nextToken: string;
  /** Size of the response message on the wire, when the client knows it. */
  bytes?: number;
}

/** Per-call options. */
export interface CallOptions {
  /** Deadline of the call, in milliseconds from now. */
  timeoutMs: number;
  /** Extra metrics label `migrated` (CSI migration). */
  migrated?: boolean;
  /**
   * The leader's lease fence, asked synchronously immediately before the request is written to
   * the connection (nothing asynchronous runs between the answer and the write); when it says no,
   * the request is not sent and the call rejects with {@link import("../lease_fence.ts").FencedError}. The calls of start-up
   * (probe, plugin info, capabilities) need no lease and carry none.
   */
  fence?: LeaseFence;
}

/**
 * The calls the attacher makes to a CSI driver. Every method rejects with {@link CsiError}, or
 * with {@link import("../lease_fence.ts").FencedError} when its {@link CallOptions.fence} refused to send it (the driver
 * never saw it; not a call of the driver's, so not in the call metrics).
 */
export interface CsiClient {
  probe(opts: CallOptions): Promise<{ ready?: boolean }>;
  getPluginInfo(opts: CallOptions): Promise<{ name: string; vendorVersion: string }>;
  /** Plugin capability service types, e.g. `CONTROLLER_SERVICE`. */
  getPluginCapabilities(opts: CallOptions): Promise<Set<string>>;
  /** Controller RPC types, e.g. `PUBLISH_UNPUBLISH_VOLUME`, `LIST_VOLUMES`. */
  controllerGetCapabilities(opts: CallOptions): Promise<Set<string>>;
  controllerPublishVolume(
    req: ControllerPublishVolumeRequest,
    opts: CallOptions,
  ): Promise<{ publishContext: Record<string, string> }>;
  controllerUnpublishVolume(
    req: ControllerUnpublishVolumeRequest,
    opts: CallOptions,
  ): Promise<void>;
  listVolumes(
    req: { maxEntries: number; startingToken: string },
    opts: CallOptions,
  ): Promise<ListVolumesPage>;
  close(): void;
}

/**
 * A failed CSI call. `message` reads as Go's `status.Error(...).Error()`:
 * `rpc error: code = DeadlineExceeded desc = context deadline exceeded`, so texts saved in
 * `attachError` match the Go attacher's. `code` is undefined when the failure was not a gRPC
 * status (the metrics label is then `unknown-non-grpc`). The client makes one of every
 * {@link import("../wire/grpc/status.ts").GrpcStatusError} the channel gives.
 */
export class CsiError extends Error {
  readonly code: number | undefined;
  readonly details: string;

  constructor(code: number | undefined, details: string, options?: ErrorOptions) {
    super(
      code === undefined ? details : `rpc error: code = ${grpcCodeName(code)} desc = ${details}`,
      options,
    );
    this.name = "CsiError";
    this.code = code;
    this.details = details;
  }
}
