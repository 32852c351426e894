/**
 * An in-memory CSI driver with controller publish/unpublish, for the sandbox demo and for
 * tests that need a driver with real state. Volumes and nodes are created by method calls; the
 * driver remembers which volume is published to which node, so a test can check what the
 * attacher really did.
 *
 * @module
 */

import type { AccessModeName } from "../../lib/csi/api.ts";
import {
  type ControllerHandlers,
  type CsiDriverServer,
  CsiStatusError,
  type DriverPublishRequest,
  type DriverVolumeCapability,
  type IdentityHandlers,
  type ListVolumesEntryMessage,
  startCsiDriverServer,
} from "./server.ts";
import { type Logger, nullLogger } from "../../lib/observe/logger.ts";
import { type DriverFaults, noFaults, withFaults } from "./driver_faults.ts";

/** gRPC status codes the driver answers with (numbers as in grpc's statuscodes.md). */
const Code = {
  InvalidArgument: 3,
  NotFound: 5,
  AlreadyExists: 6,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
} as const;

/** Access modes that allow a volume on one node only. */
const SINGLE_NODE_MODES: ReadonlySet<AccessModeName> = new Set<AccessModeName>([
  "SINGLE_NODE_WRITER",
  "SINGLE_NODE_READER_ONLY",
  "SINGLE_NODE_SINGLE_WRITER",
  "SINGLE_NODE_MULTI_WRITER",
]);

/** Dependencies of {@link ExampleDriver}. */
export interface ExampleDriverDeps {
  /** Logs publish and unpublish at verbosity 2 (never secrets). Default: nothing. */
  log?: Logger;
}

/** Options of {@link ExampleDriver}. */
export interface ExampleDriverOptions {
  /** Driver name returned by GetPluginInfo. Default `example.csi.k8s.io`. */
  name?: string;
  /** Default `0.1.0`. */
  vendorVersion?: string;
  /**
   * Node IDs the driver knows. Publishing to another node fails with NotFound. Default: none,
   * which means every node ID is accepted.
   */
  nodeIds?: readonly string[];
  /** Publications per node before ResourceExhausted; 0 (default) means no limit. */
  maxVolumesPerNode?: number;
  /**
   * A fault to practise against: publishing what is already published answers AlreadyExists,
   * unpublishing what is not published answers NotFound, as a driver that is not idempotent
   * would (the CSI spec asks for OK in both cases). Default false.
   */
  nonIdempotent?: boolean;
  /** Calls that fail or answer late (see driver_faults.ts). Default none. */
  faults?: DriverFaults;
}

/** One volume published to one node. */
export interface Publication {
  volumeId: string;
  nodeId: string;
  readonly: boolean;
  mode: AccessModeName;
}

interface VolumeState {
  capacityBytes: number;
  volumeContext: Record<string, string>;
  /** nodeId → publication. */
  published: Map<string, Publication>;
}

/**
 * The in-memory driver. Publishing and unpublishing follow the CSI spec's ControllerPublishVolume
 * and ControllerUnpublishVolume rules, including idempotency:
 * - publish: InvalidArgument without volume ID, node ID or a complete capability; NotFound for an
 *   unknown volume or node; OK with the same publish context when already published to that node
 *   with the same readonly flag and mode, AlreadyExists when with different ones;
 *   FailedPrecondition when a single-node mode conflicts with a publication on another node;
 *   ResourceExhausted beyond `maxVolumesPerNode`.
 * - unpublish: InvalidArgument without volume ID; OK for an unknown volume, an unknown node or a
 *   volume that is not published there; an empty node ID unpublishes from every node.
 * - with `nonIdempotent`, a repeated publish answers AlreadyExists and an unpublish of what is
 *   not published NotFound; `faults` make calls fail or answer late, ignore single-node modes
 *   or hide publications from ListVolumes.
 * - ListVolumes: volumes by ID, paged by `max_entries` with the next index as token (a bad token
 *   gives Aborted), each with the nodes it is published to.
 *
 * Publish context: `{"devicePath": "/dev/example/<volume ID>"}`.
 *
 * @example
 * ```ts ignore
 * const driver = new ExampleDriver({}, { nodeIds: ["node-1"] });
 * driver.createVolume("vol-1");
 * const server = await driver.start("/tmp/csi/csi.sock");
 * // ... the attacher publishes vol-1 to node-1 ...
 * driver.isPublished("vol-1", "node-1"); // true
 * await server.close();
 * ```
 */
export class ExampleDriver {
  #log: Logger;
  #name: string;
  #vendorVersion: string;
  #nodeIds: Set<string> | undefined;
  #maxVolumesPerNode: number;
  #nonIdempotent: boolean;
  #faults: DriverFaults;
  #volumes = new Map<string, VolumeState>();

  constructor(deps: ExampleDriverDeps = {}, options: ExampleDriverOptions = {}) {
    this.#log = deps.log ?? nullLogger;
    this.#name = options.name ?? "example.csi.k8s.io";
    this.#vendorVersion = options.vendorVersion ?? "0.1.0";
    this.#nodeIds = options.nodeIds && options.nodeIds.length > 0
      ? new Set(options.nodeIds)
      : undefined;
    this.#maxVolumesPerNode = options.maxVolumesPerNode ?? 0;
    this.#nonIdempotent = options.nonIdempotent ?? false;
    this.#faults = options.faults ?? noFaults();
  }

  /** The driver name (GetPluginInfo). */
  get name(): string {
    return this.#name;
  }

  /** The controller capabilities the driver reports. */
  static readonly CONTROLLER_CAPABILITIES: readonly string[] = Object.freeze([
    "PUBLISH_UNPUBLISH_VOLUME",
    "LIST_VOLUMES",
    "LIST_VOLUMES_PUBLISHED_NODES",
    "PUBLISH_READONLY",
  ]);

  /**
   * Creates a volume.
   * @throws {RangeError} for an empty ID or an ID that exists.
   */
  createVolume(
    volumeId: string,
    opts: { capacityBytes?: number; volumeContext?: Record<string, string> } = {},
  ): void {
    if (volumeId === "") throw new RangeError("volume ID must not be empty");
    if (this.#volumes.has(volumeId)) throw new RangeError(`volume ${volumeId} exists`);
    this.#volumes.set(volumeId, {
      capacityBytes: opts.capacityBytes ?? 1 << 30,
      volumeContext: { ...opts.volumeContext },
      published: new Map(),
    });
  }

  /**
   * Deletes a volume that is not published anywhere.
   * @returns false when there was no such volume.
   * @throws {Error} when the volume is still published.
   */
  deleteVolume(volumeId: string): boolean {
    const volume = this.#volumes.get(volumeId);
    if (volume === undefined) return false;
    if (volume.published.size > 0) throw new Error(`volume ${volumeId} is still published`);
    return this.#volumes.delete(volumeId);
  }

  /** Makes a node ID known (only matters when `nodeIds` restricted them). */
  addNode(nodeId: string): void {
    this.#nodeIds?.add(nodeId);
  }

  /** Every current publication, ordered by volume ID then node ID. */
  publications(): Publication[] {
    const out: Publication[] = [];
    for (const [, volume] of sortedEntries(this.#volumes)) {
      for (const [, publication] of sortedEntries(volume.published)) out.push({ ...publication });
    }
    return out;
  }

  /** Whether `volumeId` is published to `nodeId`. */
  isPublished(volumeId: string, nodeId: string): boolean {
    return this.#volumes.get(volumeId)?.published.has(nodeId) ?? false;
  }

  /** Identity handlers for {@link startCsiDriverServer}. */
  identityHandlers(): IdentityHandlers {
    return {
      getPluginInfo: () =>
        Promise.resolve({ name: this.#name, vendorVersion: this.#vendorVersion }),
      getPluginCapabilities: () =>
        Promise.resolve({ capabilities: [{ service: { type: "CONTROLLER_SERVICE" } }] }),
      probe: () => Promise.resolve({ ready: { value: true } }),
    };
  }

  /** Controller handlers for {@link startCsiDriverServer}, with the driver's faults. */
  controllerHandlers(): ControllerHandlers {
    return withFaults({
      controllerGetCapabilities: () =>
        Promise.resolve({
          capabilities: ExampleDriver.CONTROLLER_CAPABILITIES.map((type) => ({ rpc: { type } })),
        }),
      controllerPublishVolume: (req) => Promise.resolve(this.publish(req)),
      controllerUnpublishVolume: (req) => {
        this.unpublish(req);
        return Promise.resolve();
      },
      listVolumes: (req) => Promise.resolve(this.list(req)),
    }, this.#faults);
  }

  /** Starts a server for this driver on `address` (socket path or `127.0.0.1:0`). */
  start(address: string): Promise<CsiDriverServer> {
    return startCsiDriverServer({
      address,
      identity: this.identityHandlers(),
      controller: this.controllerHandlers(),
    });
  }

  /**
   * ControllerPublishVolume.
   * @throws {CsiStatusError} as described on the class.
   */
  publish(req: DriverPublishRequest): { publishContext: Record<string, string> } {
    if (req.volumeId === "") {
      throw new CsiStatusError(Code.InvalidArgument, "volume ID missing in request");
    }
    if (req.nodeId === "") {
      throw new CsiStatusError(Code.InvalidArgument, "node ID missing in request");
    }
    const mode = completeMode(req.volumeCapability);
    if (mode === undefined) {
      throw new CsiStatusError(
        Code.InvalidArgument,
        "volume capability missing or incomplete in request",
      );
    }
    const volume = this.#volumes.get(req.volumeId);
    if (volume === undefined) {
      throw new CsiStatusError(Code.NotFound, `volume ${req.volumeId} not found`);
    }
    if (this.#nodeIds !== undefined && !this.#nodeIds.has(req.nodeId)) {
      throw new CsiStatusError(Code.NotFound, `node ${req.nodeId} not found`);
    }
    const publishContext = { devicePath: `/dev/example/${req.volumeId}` };
    const existing = volume.published.get(req.nodeId);
    if (existing !== undefined) {
      if (this.#nonIdempotent) {
        throw new CsiStatusError(
          Code.AlreadyExists,
          `volume ${req.volumeId} is already published to node ${req.nodeId}`,
        );
      }
      if (existing.readonly !== req.readonly || existing.mode !== mode) {
        throw new CsiStatusError(
          Code.AlreadyExists,
          `volume ${req.volumeId} is already published to node ${req.nodeId} with other options`,
        );
      }
      return { publishContext };
    }
    for (const other of volume.published.values()) {
      if (this.#faults.multiAttach) break;
      if (SINGLE_NODE_MODES.has(mode) || SINGLE_NODE_MODES.has(other.mode)) {
        throw new CsiStatusError(
          Code.FailedPrecondition,
          `volume ${req.volumeId} is published to node ${other.nodeId} in a single-node mode`,
        );
      }
    }
    if (this.#maxVolumesPerNode > 0 && this.#countOnNode(req.nodeId) >= this.#maxVolumesPerNode) {
      throw new CsiStatusError(
        Code.ResourceExhausted,
        `node ${req.nodeId} has the maximum of ${this.#maxVolumesPerNode} volumes`,
      );
    }
    volume.published.set(req.nodeId, {
      volumeId: req.volumeId,
      nodeId: req.nodeId,
      readonly: req.readonly,
      mode,
    });
    this.#log.v(2).info("Published volume", { volumeHandle: req.volumeId, nodeID: req.nodeId });
    return { publishContext };
  }

  /**
   * ControllerUnpublishVolume.
   * @throws {CsiStatusError} InvalidArgument without volume ID.
   */
  unpublish(req: { volumeId: string; nodeId: string }): void {
    if (req.volumeId === "") {
      throw new CsiStatusError(Code.InvalidArgument, "volume ID missing in request");
    }
    const volume = this.#volumes.get(req.volumeId);
    if (this.#nonIdempotent && !(volume?.published.has(req.nodeId) ?? false)) {
      throw new CsiStatusError(
        Code.NotFound,
        `volume ${req.volumeId} is not published to node ${req.nodeId}`,
      );
    }
    if (volume === undefined) return;
    const nodes = req.nodeId === "" ? [...volume.published.keys()] : [req.nodeId];
    for (const node of nodes) {
      if (volume.published.delete(node)) {
        this.#log.v(2).info("Unpublished volume", { volumeHandle: req.volumeId, nodeID: node });
      }
    }
  }

  /**
   * ListVolumes.
   * @throws {CsiStatusError} InvalidArgument for negative `maxEntries`, Aborted for a bad token.
   */
  list(req: { maxEntries: number; startingToken: string }): {
    entries: ListVolumesEntryMessage[];
    nextToken: string;
  } {
    if (req.maxEntries < 0) {
      throw new CsiStatusError(Code.InvalidArgument, "max_entries must not be negative");
    }
    const volumes = sortedEntries(this.#volumes);
    let start = 0;
    if (req.startingToken !== "") {
      start = /^\d+$/.test(req.startingToken) ? Number(req.startingToken) : -1;
      if (start < 0 || start > volumes.length) {
        throw new CsiStatusError(
          Code.Aborted,
          `invalid starting_token ${JSON.stringify(req.startingToken)}`,
        );
      }
    }
    const end = req.maxEntries > 0
      ? Math.min(volumes.length, start + req.maxEntries)
      : volumes.length;
    const entries = volumes.slice(start, end).map(([id, volume]): ListVolumesEntryMessage => {
      return {
        volume: {
          volumeId: id,
          capacityBytes: String(volume.capacityBytes),
          volumeContext: { ...volume.volumeContext },
        },
        status: {
          publishedNodeIds: this.#faults.hidePublished ? [] : [...volume.published.keys()].sort(),
        },
      };
    });
    return { entries, nextToken: end < volumes.length ? String(end) : "" };
  }

  #countOnNode(nodeId: string): number {
    let n = 0;
    for (const volume of this.#volumes.values()) if (volume.published.has(nodeId)) n++;
    return n;
  }
}

/** Map entries ordered by key. */
function sortedEntries<V>(map: Map<string, V>): [string, V][] {
  return [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The access mode of a capability that names an access type and a known mode. */
function completeMode(cap: DriverVolumeCapability | null): AccessModeName | undefined {
  if (cap === null || (cap.block === undefined && cap.mount === undefined)) return undefined;
  const mode = cap.accessMode?.mode;
  return mode === undefined || mode === "UNKNOWN" ? undefined : mode;
}
