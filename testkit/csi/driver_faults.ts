/**
 * Faults for the example driver, to practise against: a call that always fails with a gRPC
 * code (`--fail=publish:NotFound`), a call that answers late (`--slow=publish:5s`), a
 * single-node volume published to a second node (`--multi-attach`), a ListVolumes that lists
 * no publications (`--hide-published`). The non-idempotent mode is an option of the driver itself ({@link
 * import("./example_driver.ts").ExampleDriverOptions.nonIdempotent}).
 *
 * @module
 */

import { parseGoDuration } from "../../lib/go_duration.ts";
import { GRPC_CODE_NAMES, GrpcCode } from "../../lib/wire/grpc/status.ts";
import { type ControllerHandlers, CsiStatusError } from "./server.ts";

/** The calls a fault can be put on, by their short name in a fault spec. */
export const FAULT_CALLS = {
  publish: "controllerPublishVolume",
  unpublish: "controllerUnpublishVolume",
  "list-volumes": "listVolumes",
} as const;

/** A call a fault can be put on. */
export type FaultCall = keyof typeof FAULT_CALLS;

/** The faults of one driver. */
export interface DriverFaults {
  /** Each such call fails with this gRPC code (numbers as in grpc's statuscodes.md). */
  fail: Partial<Record<FaultCall, number>>;
  /** Each such call waits this many ms before it is answered. */
  slowMs: Partial<Record<FaultCall, number>>;
  /** Publishes a single-node volume to a second node instead of FailedPrecondition. */
  multiAttach?: boolean;
  /** ListVolumes lists every volume published to no node. */
  hidePublished?: boolean;
}

/** No faults. */
export function noFaults(): DriverFaults {
  return { fail: {}, slowMs: {} };
}

function faultCall(text: string, spec: string): FaultCall {
  if (!Object.hasOwn(FAULT_CALLS, text)) {
    throw new Error(
      `${JSON.stringify(spec)}: unknown call ${JSON.stringify(text)}; one of ${
        Object.keys(FAULT_CALLS).join(", ")
      }`,
    );
  }
  return text as FaultCall;
}

function split(spec: string): [string, string] {
  const colon = spec.indexOf(":");
  if (colon <= 0 || colon === spec.length - 1) {
    throw new Error(`${JSON.stringify(spec)}: expected <call>:<value>`);
  }
  return [spec.slice(0, colon), spec.slice(colon + 1)];
}

/**
 * Adds a `--fail` spec (`publish:NotFound`, `unpublish:Internal`, `list-volumes:Unavailable`;
 * a code by its Go name or number) to `faults`.
 *
 * @throws {Error} for an unknown call or code.
 */
export function addFailure(faults: DriverFaults, spec: string): DriverFaults {
  const [call, codeText] = split(spec);
  const named = GRPC_CODE_NAMES.find((name) => name.toLowerCase() === codeText.toLowerCase());
  const code = named !== undefined ? GrpcCode[named] : Number(codeText);
  if (!Number.isInteger(code) || code < 1 || code > 16) {
    throw new Error(`${JSON.stringify(spec)}: not a gRPC error code: ${JSON.stringify(codeText)}`);
  }
  return { ...faults, fail: { ...faults.fail, [faultCall(call, spec)]: code } };
}

/**
 * Adds a `--slow` spec (`publish:5s`, a Go duration) to `faults`.
 *
 * @throws {Error} for an unknown call or a bad duration.
 */
export function addSlowness(faults: DriverFaults, spec: string): DriverFaults {
  const [call, durationText] = split(spec);
  const ms = parseGoDuration(durationText);
  if (ms < 0) throw new Error(`${JSON.stringify(spec)}: negative duration`);
  return { ...faults, slowMs: { ...faults.slowMs, [faultCall(call, spec)]: ms } };
}

/** The text a failing call answers with. */
export function faultMessage(call: FaultCall, code: number): string {
  const name = GRPC_CODE_NAMES.find((n) => GrpcCode[n] === code) ?? String(code);
  return `fault injected with --fail=${call}:${name}`;
}

/**
 * `handlers` with `faults` applied: a slow call waits first (also when it then fails), a
 * failing call throws {@link CsiStatusError} without calling the handler, so the driver's
 * state does not change.
 */
export function withFaults(
  handlers: ControllerHandlers,
  faults: DriverFaults,
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): ControllerHandlers {
  const out: ControllerHandlers = { ...handlers };
  for (const [call, member] of Object.entries(FAULT_CALLS) as [FaultCall, string][]) {
    const slowMs = faults.slowMs[call];
    const code = faults.fail[call];
    const original = (handlers as Record<string, unknown>)[member];
    if (typeof original !== "function" || (slowMs === undefined && code === undefined)) continue;
    (out as Record<string, unknown>)[member] = async (...args: unknown[]) => {
      if (slowMs !== undefined && slowMs > 0) await sleep(slowMs);
      if (code !== undefined) throw new CsiStatusError(code, faultMessage(call, code));
      return await original.apply(handlers, args);
    };
  }
  return out;
}
