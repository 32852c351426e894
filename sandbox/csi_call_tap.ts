/**
 * Observes the attacher's CSI calls through its logger: the CSI client logs every call at
 * verbosity 5 as "GRPC call" (method, sanitized request JSON) and then "GRPC response" or
 * "GRPC error" ({@link import("../lib/csi/grpc_log.ts")}). A logger built here receives those lines as
 * structured fields, turns them into {@link CsiCallEvent}s and forwards every line to the
 * logger the user asked for, which applies its own verbosity.
 *
 * Requests arrive already sanitized: secret fields read `***stripped***`.
 *
 * @module
 */

import { GRPC_LOG_VERBOSITY } from "../lib/csi/grpc_log.ts";
import type { Fields, Logger } from "../lib/observe/logger.ts";

/** One observed step of a CSI call. */
export type CsiCallEvent =
  /** The call was sent. `method` is the short name, e.g. `ControllerPublishVolume`. */
  | { kind: "call"; method: string; request: Record<string, unknown> }
  /** The call succeeded. */
  | { kind: "response"; method: string; response: Record<string, unknown> }
  /** The call failed; `error` is the error text as the attacher records it. */
  | { kind: "error"; method: string; error: string };

/** The short method name of a full gRPC path (`/csi.v1.Controller/Probe` → `Probe`). */
function shortMethod(path: unknown): string {
  const text = typeof path === "string" ? path : String(path);
  return text.slice(text.lastIndexOf("/") + 1);
}

/** Parses a logged JSON object; a text that is not one (e.g. capped) is kept under `text`. */
function parseLogged(text: unknown): Record<string, unknown> {
  if (typeof text !== "string") return {};
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
    return { value };
  } catch (err) {
    if (err instanceof SyntaxError) return { text };
    throw err;
  }
}

/** The event a verbosity-5 log line stands for, if it is a gRPC call line. */
function eventOf(msg: string, fields: Fields | undefined): CsiCallEvent | undefined {
  if (fields === undefined) return undefined;
  const method = shortMethod(fields.method);
  switch (msg) {
    case "GRPC call":
      return { kind: "call", method, request: parseLogged(fields.request) };
    case "GRPC response":
      return { kind: "response", method, response: parseLogged(fields.response) };
    case "GRPC error":
      return { kind: "error", method, error: String(fields.err) };
    default:
      return undefined;
  }
}

class TapLogger implements Logger {
  readonly #forward: Logger;
  readonly #onEvent: (event: CsiCallEvent) => void;

  constructor(forward: Logger, onEvent: (event: CsiCallEvent) => void) {
    this.#forward = forward;
    this.#onEvent = onEvent;
  }

  info(msg: string, fields?: Fields): void {
    this.#forward.info(msg, fields);
  }

  error(err: unknown, msg: string, fields?: Fields): void {
    this.#forward.error(err, msg, fields);
  }

  v(level: number): Pick<Logger, "info"> {
    return {
      info: (msg, fields) => {
        if (level === GRPC_LOG_VERBOSITY) {
          const event = eventOf(msg, fields);
          if (event !== undefined) this.#onEvent(event);
        }
        this.#forward.v(level).info(msg, fields);
      },
    };
  }

  enabled(level: number): boolean {
    return level <= GRPC_LOG_VERBOSITY || this.#forward.enabled(level);
  }

  with(fields: Fields): Logger {
    return new TapLogger(this.#forward.with(fields), this.#onEvent);
  }
}

/**
 * A logger that reports the CSI calls logged through it to `onEvent` (synchronously, in the
 * order the client logs them) and forwards every line to `forward`.
 *
 * Guarantees: `enabled(5)` is always true, so the CSI client always logs its calls; what
 * `forward` prints still depends only on its own verbosity.
 *
 * @example
 * ```ts
 * import { nullLogger } from "../lib/observe/logger.ts";
 * const events: CsiCallEvent[] = [];
 * const log = createCsiCallTap(nullLogger, (e) => events.push(e));
 * log.v(5).info("GRPC call", { method: "/csi.v1.Identity/Probe", request: "{}" });
 * // events: [{ kind: "call", method: "Probe", request: {} }]
 * ```
 */
export function createCsiCallTap(
  forward: Logger,
  onEvent: (event: CsiCallEvent) => void,
): Logger {
  return new TapLogger(forward, onEvent);
}
