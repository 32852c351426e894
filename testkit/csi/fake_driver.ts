/**
 * A scripted CSI driver for tests, on a real gRPC server ({@link startCsiDriverServer}).
 *
 * Each incoming call is checked against the next scripted entry of the same method: the fields
 * named in `expect` must equal the request's (after both went through the protobuf encoding, so
 * omitted proto3 defaults compare equal to explicit ones), then the entry's `error` or `respond`
 * answers, after `delayMs`. A call with no scripted entry left is:
 * - for GetPluginInfo, GetPluginCapabilities, Probe and ControllerGetCapabilities: answered from
 *   the configured name and capabilities (Probe: ready);
 * - for publish, unpublish and ListVolumes: answered by the `permissive` {@link ExampleDriver}
 *   when one is given, otherwise recorded as a failure and answered with Internal (13).
 * A mismatch is recorded as a failure and answered with Internal (13) too.
 *
 * Secret values never appear in failure texts; {@link FakeCsiDriver.calls} holds the requests
 * with their secrets, for comparison.
 *
 * @module
 */

import { isDeepStrictEqual } from "node:util";
import type { CsiServiceName } from "../../lib/csi/schema.ts";
import { isSecretField } from "./schemas.ts";
import { CSI_SERVER_LOADER_OPTIONS, loadCsiProto } from "./proto_loader.ts";
import {
  type CallContext,
  type ControllerHandlers,
  type CsiDriverServer,
  CsiStatusError,
  type IdentityHandlers,
  startCsiDriverServer,
} from "./server.ts";
import type { ExampleDriver } from "./example_driver.ts";

/** The methods the fake serves. */
export type FakeCsiMethod =
  | "GetPluginInfo"
  | "GetPluginCapabilities"
  | "Probe"
  | "ControllerGetCapabilities"
  | "ControllerPublishVolume"
  | "ControllerUnpublishVolume"
  | "ListVolumes";

const SERVICE_OF: Readonly<Record<FakeCsiMethod, CsiServiceName>> = {
  GetPluginInfo: "Identity",
  GetPluginCapabilities: "Identity",
  Probe: "Identity",
  ControllerGetCapabilities: "Controller",
  ControllerPublishVolume: "Controller",
  ControllerUnpublishVolume: "Controller",
  ListVolumes: "Controller",
};

/** gRPC Internal: the answer to unexpected or mismatching calls. */
const INTERNAL = 13;

/** One expected call and its answer. */
export interface ScriptedCall {
  method: FakeCsiMethod;
  /**
   * Request fields to compare (camelCase), e.g. `volumeId`, `nodeId`, `readonly`, `secrets`,
   * `volumeContext`, `volumeCapability`. Fields not named are not compared.
   */
  expect?: Record<string, unknown>;
  /** Response (camelCase); `{}` when neither this nor `error` is given. */
  respond?: object;
  /** Answer with this gRPC status instead of a response. */
  error?: { code: number; message: string };
  /** Wait this long (real time) before answering. */
  delayMs?: number;
  /** Answer only once this settles (after `delayMs`): holds a call until the test lets it go. */
  until?: Promise<unknown>;
}

/** A call the fake received. */
export interface RecordedCall {
  method: FakeCsiMethod;
  /** The request as decoded, secrets included. */
  request: Record<string, unknown>;
  /** Milliseconds from its arrival to the deadline the client sent; `Infinity` without one. */
  timeoutMs: number;
}

/** Options of {@link FakeCsiDriver}. */
export interface FakeCsiDriverOptions {
  /** Unix socket path or `127.0.0.1:0`. */
  address: string;
  /** GetPluginInfo name. Default `csi/test`. */
  pluginName?: string;
  /** Plugin service capabilities. Default `["CONTROLLER_SERVICE"]`. */
  pluginCapabilities?: readonly string[];
  /** Controller RPC capabilities. Default `["PUBLISH_UNPUBLISH_VOLUME"]`. */
  controllerCapabilities?: readonly string[];
  /** Expected calls, in order per method. More can be added with {@link FakeCsiDriver.expect}. */
  script?: readonly ScriptedCall[];
  /** Answers unscripted publish, unpublish and ListVolumes calls (flood tests). */
  permissive?: ExampleDriver;
}

/**
 * The scripted fake. Create it, {@link start} it, point the client at {@link address}, then
 * {@link assertDone} and {@link close}.
 *
 * @example
 * ```ts ignore
 * await using driver = await FakeCsiDriver.start({
 *   address: `${dir}/csi.sock`,
 *   script: [{ method: "ControllerPublishVolume", expect: { volumeId: "v1" }, respond: {} }],
 * });
 * // ... exercise the client ...
 * driver.assertDone();
 * ```
 */
export class FakeCsiDriver {
  #options: FakeCsiDriverOptions;
  #pending = new Map<FakeCsiMethod, ScriptedCall[]>();
  #calls: RecordedCall[] = [];
  #failures: string[] = [];
  #timers = new Set<{ id: ReturnType<typeof setTimeout>; resolve: () => void }>();
  #proto = loadCsiProto(CSI_SERVER_LOADER_OPTIONS);
  #server: CsiDriverServer | undefined;

  constructor(options: FakeCsiDriverOptions) {
    this.#options = options;
    this.expect(...(options.script ?? []));
  }

  /** Creates and starts a fake. */
  static async start(options: FakeCsiDriverOptions): Promise<FakeCsiDriver> {
    const driver = new FakeCsiDriver(options);
    await driver.start();
    return driver;
  }

  /** Starts serving. @throws {Error} when already started or binding fails. */
  async start(): Promise<void> {
    if (this.#server !== undefined) throw new Error("fake CSI driver already started");
    this.#server = await startCsiDriverServer({
      address: this.#options.address,
      identity: this.#identity(),
      controller: this.#controller(),
    });
  }

  /** Where clients connect. @throws {Error} before {@link start}. */
  get address(): string {
    if (this.#server === undefined) throw new Error("fake CSI driver not started");
    return this.#server.address;
  }

  /** Appends expected calls to the script. */
  expect(...calls: ScriptedCall[]): void {
    for (const call of calls) {
      const queue = this.#pending.get(call.method) ?? [];
      queue.push(call);
      this.#pending.set(call.method, queue);
    }
  }

  /** Every call received, in order. */
  get calls(): readonly RecordedCall[] {
    return this.#calls;
  }

  /** Calls of one method, in order. */
  callsOf(method: FakeCsiMethod): RecordedCall[] {
    return this.#calls.filter((c) => c.method === method);
  }

  /** Failures recorded so far (unexpected calls, mismatches). */
  get failures(): readonly string[] {
    return this.#failures;
  }

  /** @throws {Error} listing every failure and every scripted call that did not happen. */
  assertDone(): void {
    const problems = [...this.#failures];
    for (const [method, queue] of this.#pending) {
      for (const call of queue) {
        problems.push(`expected ${method} call did not happen: ${describe(method, call.expect)}`);
      }
    }
    if (problems.length > 0) throw new Error(`fake CSI driver:\n  ${problems.join("\n  ")}`);
  }

  /** Stops the server and pending delays. Idempotent. */
  async close(): Promise<void> {
    for (const timer of this.#timers) {
      clearTimeout(timer.id);
      timer.resolve();
    }
    this.#timers.clear();
    await this.#server?.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #identity(): IdentityHandlers {
    const o = this.#options;
    return {
      getPluginInfo: (req, call) =>
        this.#handle(
          "GetPluginInfo",
          req,
          call,
          () => ({
            name: o.pluginName ?? "csi/test",
            vendorVersion: "0.0.0",
          }),
        ) as Promise<{ name: string; vendorVersion: string }>,
      getPluginCapabilities: (req, call) =>
        this.#handle(
          "GetPluginCapabilities",
          req,
          call,
          () => ({
            capabilities: (o.pluginCapabilities ?? ["CONTROLLER_SERVICE"]).map((type) => ({
              service: { type },
            })),
          }),
        ) as Promise<{ capabilities: { service: { type: string } }[] }>,
      probe: (req, call) =>
        this.#handle(
          "Probe",
          req,
          call,
          () => ({ ready: { value: true } }),
        ) as Promise<
          { ready: { value: boolean } }
        >,
    };
  }

  #controller(): ControllerHandlers {
    const o = this.#options;
    const permissive = o.permissive;
    return {
      controllerGetCapabilities: (req, call) =>
        this.#handle(
          "ControllerGetCapabilities",
          req,
          call,
          () => ({
            capabilities: (o.controllerCapabilities ?? ["PUBLISH_UNPUBLISH_VOLUME"]).map((
              type,
            ) => ({
              rpc: { type },
            })),
          }),
        ) as Promise<{ capabilities: { rpc: { type: string } }[] }>,
      controllerPublishVolume: (req, call) =>
        this.#handle(
          "ControllerPublishVolume",
          req,
          call,
          permissive && (() => permissive.publish(req)),
        ) as Promise<{ publishContext?: Record<string, string> }>,
      controllerUnpublishVolume: async (req, call) => {
        await this.#handle(
          "ControllerUnpublishVolume",
          req,
          call,
          permissive && (() => {
            permissive.unpublish(req);
            return {};
          }),
        );
      },
      listVolumes: (req, call) =>
        this.#handle(
          "ListVolumes",
          req,
          call,
          permissive && (() => permissive.list(req)),
        ) as Promise<
          ReturnType<ExampleDriver["list"]>
        >,
    };
  }

  async #handle(
    method: FakeCsiMethod,
    request: object,
    call: CallContext | undefined,
    fallback: (() => object) | undefined,
  ): Promise<object> {
    const req = request as Record<string, unknown>;
    this.#calls.push({ method, request: req, timeoutMs: call?.timeoutMs ?? Infinity });
    const scripted = this.#pending.get(method)?.shift();
    if (scripted === undefined) {
      if (fallback) return fallback();
      return this.#fail(`unexpected ${method} call: ${describe(method, req)}`);
    }
    const mismatch = this.#compare(method, scripted.expect, req);
    if (mismatch !== undefined) return this.#fail(`${method} call mismatch: ${mismatch}`);
    if (scripted.delayMs !== undefined && scripted.delayMs > 0) await this.#sleep(scripted.delayMs);
    if (scripted.until !== undefined) await scripted.until.catch(() => {});
    if (scripted.error) throw new CsiStatusError(scripted.error.code, scripted.error.message);
    return scripted.respond ?? {};
  }

  #fail(text: string): never {
    this.#failures.push(text);
    throw new CsiStatusError(INTERNAL, `fake CSI driver: ${text}`);
  }

  /** Describes the first difference, or undefined when the named fields all match. */
  #compare(
    method: FakeCsiMethod,
    expect: Record<string, unknown> | undefined,
    actual: Record<string, unknown>,
  ): string | undefined {
    if (expect === undefined) return undefined;
    const definition = this.#proto.method(SERVICE_OF[method], method).definition;
    // Round-trip the expectation so that it has the same shape and defaults as a received request.
    const normalized = definition.requestDeserialize(
      definition.requestSerialize(expect),
    ) as Record<string, unknown>;
    for (const key of Object.keys(expect)) {
      if (!(key in normalized)) return `${key} is not a field of ${method}Request`;
      if (!isDeepStrictEqual(normalized[key], actual[key])) {
        const secret = isSecretField(`csi.v1.${method}Request`, key);
        return secret
          ? `${key} differs (secret, values not shown)`
          : `${key}: expected ${JSON.stringify(normalized[key])}, got ${
            JSON.stringify(actual[key])
          }`;
      }
    }
    return undefined;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = {
        id: setTimeout(() => {
          this.#timers.delete(timer);
          resolve();
        }, ms),
        resolve,
      };
      this.#timers.add(timer);
    });
  }
}

/** A request for failure texts, with secret fields replaced. */
function describe(method: FakeCsiMethod, request: Record<string, unknown> | undefined): string {
  if (request === undefined) return "{}";
  const shown: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(request)) {
    shown[key] = isSecretField(`csi.v1.${method}Request`, key) ? "***stripped***" : value;
  }
  return JSON.stringify(shown);
}
