/**
 * gRPC call logging as csi-lib-utils' `LogGRPC` interceptor does it: at verbosity 5, "GRPC call"
 * with the request, then "GRPC response" or "GRPC error". Requests and responses are logged as
 * JSON with every `csi_secret` field replaced by {@link STRIPPED} (as protosanitizer does), and
 * responses are capped to `--max-grpc-log-length` characters.
 *
 * @module
 */

import type { FieldSchema, MessageSchema } from "./schema.ts";
import type { Logger } from "../observe/logger.ts";
import { errorText } from "../errors.ts";

/** What a secret field's value is replaced with (protosanitizer's text). */
export const STRIPPED = "***stripped***";

/** The verbosity of every line written here (klog `V(5)`). */
export const GRPC_LOG_VERBOSITY = 5;

/**
 * Returns a copy of `message` (a camelCase object of message `type`) in which every field
 * marked `csi_secret`, at any depth, is replaced by {@link STRIPPED}. A secret map is replaced as
 * a whole; an empty secret (empty map or string, absent) is left as it is, since it reveals
 * nothing. Keys the type does not know (such as the virtual oneof properties) are copied.
 *
 * Guarantees: the input is not modified; no value of a secret field appears in the result.
 */
export function stripSecrets(type: MessageSchema, message: unknown): unknown {
  if (message === null || typeof message !== "object" || Array.isArray(message)) return message;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(message)) {
    const field = type.byName.get(key);
    if (field === undefined) {
      out[key] = value;
    } else if (field.secret) {
      out[key] = isEmptyValue(value) ? value : STRIPPED;
    } else {
      out[key] = stripField(field, value);
    }
  }
  return out;
}

function stripField(field: FieldSchema, value: unknown): unknown {
  // Maps are map<string, string>: no message values, nothing nested to strip.
  const type = field.message;
  if (type === undefined) return value;
  if (field.repeated && Array.isArray(value)) return value.map((v) => stripSecrets(type, v));
  return stripSecrets(type, value);
}

function isEmptyValue(value: unknown): boolean {
  if (value === undefined || value === null || value === "") return true;
  if (typeof value === "object") return Object.keys(value).length === 0;
  return false;
}

/**
 * Caps `text` to `maxLength` characters (≤ 0: unlimited), appending
 * ` [response body too large, log capped to N chars]` when it cut something.
 */
export function capLogText(text: string, maxLength: number): string {
  if (maxLength <= 0 || text.length <= maxLength) return text;
  return `${text.slice(0, maxLength)} [response body too large, log capped to ${maxLength} chars]`;
}

/** What {@link logGrpcRequest} and {@link logGrpcResult} need to know about the method. */
export interface LoggedMethod {
  /** Full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume`. */
  readonly path: string;
  readonly requestType: MessageSchema;
  readonly responseType: MessageSchema;
}

/** Logs "GRPC call" with `method` and the sanitized `request` JSON, at verbosity 5. */
export function logGrpcRequest(log: Logger, method: LoggedMethod, request: unknown): void {
  if (!log.enabled(GRPC_LOG_VERBOSITY)) return;
  log.v(GRPC_LOG_VERBOSITY).info("GRPC call", {
    method: method.path,
    request: JSON.stringify(stripSecrets(method.requestType, request) ?? {}),
  });
}

/**
 * Logs the outcome of a call at verbosity 5: "GRPC response" with the sanitized response JSON
 * capped to `maxLogLength` characters (≤ 0: unlimited), or "GRPC error" with the error text.
 */
export function logGrpcResult(
  log: Logger,
  method: LoggedMethod,
  result: { response: unknown } | { error: unknown },
  maxLogLength: number,
): void {
  if (!log.enabled(GRPC_LOG_VERBOSITY)) return;
  if ("error" in result) {
    const err = result.error;
    log.v(GRPC_LOG_VERBOSITY).info("GRPC error", {
      method: method.path,
      err: errorText(err),
    });
    return;
  }
  const text = JSON.stringify(stripSecrets(method.responseType, result.response) ?? {});
  log.v(GRPC_LOG_VERBOSITY).info("GRPC response", {
    method: method.path,
    response: capLogText(text, maxLogLength),
  });
}
