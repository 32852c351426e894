/**
 * Error answers of the API server as {@link ApiError}s: the `v1.Status` body's reason and
 * message when there is one, otherwise the reason client-go gives the HTTP code
 * (`k8s.io/apimachinery/pkg/api/errors` `NewGenericServerResponse`, `reasonForCode`) and the
 * start of the body, as client-go's `rest.Request.transformUnstructuredResponseError` does.
 *
 * @module
 */

import { ApiError } from "../api.ts";
import { peerText } from "../../peer_text.ts";
import { isObject, tryParseJson } from "../json.ts";
import type { Status } from "../types.ts";

/**
 * Most characters of a non-Status error body kept in the message, and of a Status' reason; a
 * Status message is kept up to `PEER_TEXT_MAX` (4096). Control characters are escaped
 * (`lib/peer_text.ts`).
 */
const BODY_SNIPPET_CHARS = 200;
const REASON_CHARS = 128;

/** True when a body is a `v1.Status`. */
function isStatus(value: unknown): value is Status {
  return isObject(value) && value.kind === "Status";
}

/** The reason client-go gives an error answer without a Status body. */
export function reasonForCode(code: number): string {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

/**
 * A Status' `reason`, made safe to quote (it reaches logs, Events and VolumeAttachment status);
 * undefined when absent, empty or not a string.
 */
export function statusReason(status: Status | undefined): string | undefined {
  const reason: unknown = status?.reason;
  return typeof reason === "string" && reason !== "" ? peerText(reason, REASON_CHARS) : undefined;
}

/** A Status' `message`, made safe to quote; undefined when absent, empty or not a string. */
export function statusMessage(status: Status | undefined): string | undefined {
  const message: unknown = status?.message;
  return typeof message === "string" && message !== "" ? peerText(message) : undefined;
}

/**
 * The {@link ApiError} for an error answer: the Status' reason and message when the body is a
 * Status, else `the server responded with HTTP <code>` and the start of the body.
 */
export function errorFromResponse(code: number, text: string): ApiError {
  const body = tryParseJson(text);
  if (isStatus(body)) return errorFromStatus(code, body);
  const snippet = peerText(text.trim().replace(/\s+/g, " "), BODY_SNIPPET_CHARS);
  return answerError(
    code,
    reasonForCode(code),
    `the server responded with HTTP ${code}` + (snippet === "" ? "" : `: ${snippet}`),
  );
}

/**
 * The {@link ApiError} of an error answer whose body is `status` (decoded from JSON or from
 * protobuf): its reason and message, else the code's.
 */
export function errorFromStatus(code: number, status: Status): ApiError {
  return answerError(
    code,
    statusReason(status) ?? reasonForCode(code),
    statusMessage(status) ?? `the server responded with HTTP ${code}`,
  );
}

/**
 * An {@link ApiError} with no stack frames. The error is the server's answer, and where in the
 * client it was read says nothing more; nothing reads its `stack` (errors become text through
 * `errorText`, from messages and causes). Some answers are expected in bulk: every detach's
 * status write after the finalizer removal that let its VolumeAttachment go gets a 404 (the Go
 * attacher's `markAsDetached` makes the same write), and V8 captures the frames of an `Error`
 * when it is made (`Error.stackTraceLimit` of them, 10 by default), garbage for each of them.
 */
function answerError(code: number, reason: string, message: string): ApiError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new ApiError(code, reason, message);
  } finally {
    Error.stackTraceLimit = limit;
  }
}
