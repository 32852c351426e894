/**
 * The suite's own gRPC calls to the CSI driver: CreateVolume (which the attacher never calls,
 * so it is not in `proto/csi.proto`; its two messages are declared here from the CSI spec's
 * field numbers) and ListVolumes, to read the driver's state.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { csiTarget } from "../../lib/csi/client.ts";
import { csiDescriptor, loadCsiProto } from "../../testkit/csi/proto_loader.ts";

/** A volume as the driver reports it. */
export interface DriverVolume {
  volumeId: string;
  /** `volume_context`; the mock driver keeps `<nodeID>/dev` here while it is published. */
  volumeContext: Record<string, string>;
}

/**
 * CSI `CreateVolumeRequest` (spec v1.12.0): name = 1, volume_capabilities = 3, parameters = 4;
 * `CreateVolumeResponse`: volume = 1. Field names are camelCase, as in the descriptor.
 */
function createVolumeTypes(
  root: protobuf.Root,
): { request: protobuf.Type; response: protobuf.Type } {
  const ns = root.lookup("csi.v1") as protobuf.Namespace;
  const request = new protobuf.Type("E2eCreateVolumeRequest")
    .add(new protobuf.Field("name", 1, "string"))
    .add(new protobuf.Field("volumeCapabilities", 3, "VolumeCapability", "repeated"))
    .add(new protobuf.MapField("parameters", 4, "string", "string"));
  const response = new protobuf.Type("E2eCreateVolumeResponse")
    .add(new protobuf.Field("volume", 1, "Volume"));
  ns.add(request);
  ns.add(response);
  root.resolveAll();
  return { request, response };
}

const CONVERSION: protobuf.IConversionOptions = { longs: String, enums: String, defaults: true };

/**
 * A client for the driver's socket. No I/O in the constructor; call {@link DriverClient.close}.
 */
export class DriverClient {
  readonly #client: grpc.Client;
  readonly #types: { request: protobuf.Type; response: protobuf.Type };
  readonly #listVolumes = loadCsiProto().method("Controller", "ListVolumes").definition;

  constructor(socket: string) {
    this.#client = new grpc.Client(csiTarget(socket), grpc.credentials.createInsecure());
    this.#types = createVolumeTypes(protobuf.Root.fromJSON(csiDescriptor()));
  }

  #unary<Req, Res>(
    path: string,
    serialize: (value: Req) => Buffer,
    deserialize: (bytes: Buffer) => Res,
    request: Req,
    timeoutMs: number,
  ): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        path,
        serialize,
        deserialize,
        request,
        new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs },
        (err, value) => {
          if (err) reject(err);
          else if (value === undefined) reject(new Error(`${path}: empty answer`));
          else resolve(value);
        },
      );
    });
  }

  /** CreateVolume with a single-node-writer mount capability; the new volume's ID. */
  async createVolume(name: string, timeoutMs = 10_000): Promise<string> {
    const { request, response } = this.#types;
    const message = {
      name,
      volumeCapabilities: [{ mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
    };
    const answer = await this.#unary(
      "/csi.v1.Controller/CreateVolume",
      (value: typeof message) => Buffer.from(request.encode(request.fromObject(value)).finish()),
      (bytes: Buffer) => response.toObject(response.decode(bytes), CONVERSION),
      message,
      timeoutMs,
    );
    const id = (answer.volume as { volumeId?: string } | undefined)?.volumeId;
    if (id === undefined || id === "") throw new Error(`CreateVolume ${name}: no volume ID`);
    return id;
  }

  /** Every volume of the driver (ListVolumes, all pages). */
  async listVolumes(timeoutMs = 10_000): Promise<DriverVolume[]> {
    const def = this.#listVolumes;
    const out: DriverVolume[] = [];
    let token = "";
    do {
      const page = await this.#unary(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        { maxEntries: 0, startingToken: token },
        timeoutMs,
      ) as {
        entries?: { volume?: { volumeId?: string; volumeContext?: Record<string, string> } }[];
        nextToken?: string;
      };
      for (const entry of page.entries ?? []) {
        const v = entry.volume;
        if (v?.volumeId) out.push({ volumeId: v.volumeId, volumeContext: v.volumeContext ?? {} });
      }
      token = page.nextToken ?? "";
    } while (token !== "");
    return out;
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close();
  }
}
