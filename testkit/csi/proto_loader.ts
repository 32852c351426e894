/**
 * The CSI protocol for the test kit's grpc-js server and the e2e suite's own calls: services and
 * message types loaded with `@grpc/proto-loader` and protobufjs from the JSON descriptor generated
 * from `proto/csi.proto` (`deno task proto`). The attacher does not use this: its client has its
 * own schema table and codec (`lib/csi/schema.ts`, `lib/wire/grpc/protowire.ts`), which
 * `proto_loader_test.ts` checks against this loader.
 *
 * @module
 */

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";
import descriptor from "../../proto/csi_descriptor.json" with { type: "json" };
import type { CsiServiceName } from "../../lib/csi/schema.ts";

/**
 * How messages are converted to and from JS objects on the client side: camelCase field names,
 * 64-bit integers as strings, enums as their names, default values filled in, and a virtual
 * property naming the member set in each oneof.
 */
export const CSI_CLIENT_LOADER_OPTIONS: Readonly<protoLoader.Options> = Object.freeze({
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

/**
 * The conversion used by the driver server ({@link import("./server.ts")}): as the
 * client's, but without the virtual oneof properties, so a received `VolumeCapability` is just
 * `{ block: {}, accessMode: {...} }` or `{ mount: {...}, accessMode: {...} }`.
 */
export const CSI_SERVER_LOADER_OPTIONS: Readonly<protoLoader.Options> = Object.freeze({
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: false,
});

/** One unary RPC of a CSI service, with what is needed to call, serve and log it. */
export interface LoadedCsiMethod {
  /** Full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume` (the metrics label). */
  readonly path: string;
  readonly service: CsiServiceName;
  /** Method name as in the proto, e.g. `ControllerPublishVolume`. */
  readonly name: string;
  /** Reflection of the request message (for log sanitizing). */
  readonly requestType: protobuf.Type;
  /** Reflection of the response message. */
  readonly responseType: protobuf.Type;
  /** Serializers and deserializers, converting as the loader options say. */
  readonly definition: grpc.MethodDefinition<object, object>;
}

/** The loaded CSI protocol: services for grpc-js plus protobufjs reflection. */
export interface CsiProto {
  /** protobufjs reflection of the whole descriptor. */
  readonly root: protobuf.Root;
  /** Service definitions for `grpc.Server.addService`. */
  readonly services: Readonly<Record<CsiServiceName, grpc.ServiceDefinition>>;
  /** Looks up one RPC. @throws {RangeError} for a method the descriptor does not have. */
  method(service: CsiServiceName, name: string): LoadedCsiMethod;
}

/** The generated descriptor (protobufjs `INamespace` JSON), as committed. */
export function csiDescriptor(): protobuf.INamespace {
  return descriptor as protobuf.INamespace;
}

/**
 * Loads the CSI protocol with `@grpc/proto-loader`'s `fromJSON` and `grpc.loadPackageDefinition`.
 * Pure computation (a few milliseconds); callers keep the result instead of reloading per call.
 *
 * @param options conversion options; {@link CSI_CLIENT_LOADER_OPTIONS} by default.
 */
export function loadCsiProto(
  options: Readonly<protoLoader.Options> = CSI_CLIENT_LOADER_OPTIONS,
): CsiProto {
  const packageDefinition = protoLoader.fromJSON(csiDescriptor(), { ...options });
  const loaded = grpc.loadPackageDefinition(packageDefinition);
  const services = {
    Identity: serviceConstructor(loaded, "Identity").service,
    Controller: serviceConstructor(loaded, "Controller").service,
  };
  const root = protobuf.Root.fromJSON(csiDescriptor());
  root.resolveAll();
  return {
    root,
    services,
    method(service, name) {
      const definition = services[service][name];
      const reflected = root.lookupService(`csi.v1.${service}`).methods[name];
      const requestType = reflected?.resolvedRequestType;
      const responseType = reflected?.resolvedResponseType;
      if (definition === undefined || !requestType || !responseType) {
        throw new RangeError(`unknown CSI method ${service}.${name}`);
      }
      return {
        path: definition.path,
        service,
        name,
        requestType,
        responseType,
        definition: definition as grpc.MethodDefinition<object, object>,
      };
    },
  };
}

function serviceConstructor(
  loaded: grpc.GrpcObject,
  service: CsiServiceName,
): grpc.ServiceClientConstructor {
  const csi = loaded["csi"] as grpc.GrpcObject | undefined;
  const v1 = csi?.["v1"] as grpc.GrpcObject | undefined;
  const ctor = v1?.[service];
  if (typeof ctor !== "function" || !("service" in ctor)) {
    throw new Error(`the CSI descriptor has no service csi.v1.${service}`);
  }
  return ctor as grpc.ServiceClientConstructor;
}
