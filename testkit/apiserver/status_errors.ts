/**
 * API errors as kube-apiserver words them (k8s.io/apimachinery `pkg/api/errors`): the same HTTP
 * codes, reasons, messages and details, so a client sees the texts it would see in a cluster.
 *
 * @module
 */

import { ApiError, qualifiedResource } from "../../lib/kube/api.ts";
import type { Status } from "../../lib/kube/types.ts";
import type { ServedResource } from "./resources.ts";

/** The message of a Conflict on an optimistic-concurrency failure (`OptimisticLockErrorMsg`). */
export const OPTIMISTIC_LOCK_MESSAGE =
  "the object has been modified; please apply your changes to the latest version and try again";

/** An {@link ApiError} that carries the whole `Status` body the server answers with. */
export class StatusError extends ApiError {
  /** The response body. */
  readonly status: Status;

  constructor(status: Status, options?: ErrorOptions) {
    super(status.code, status.reason ?? "", status.message ?? "", options);
    this.name = "StatusError";
    this.status = status;
  }
}

/** A failure Status. Empty detail fields are left out, as Go's `omitempty` does. */
export function failureStatus(
  code: number,
  reason: string,
  message: string,
  details?: Status["details"],
): Status {
  const status: Status = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
  if (details !== undefined) {
    const d: NonNullable<Status["details"]> = {};
    if (details.name) d.name = details.name;
    if (details.group) d.group = details.group;
    if (details.kind) d.kind = details.kind;
    if (details.causes && details.causes.length > 0) d.causes = details.causes;
    if (details.retryAfterSeconds) d.retryAfterSeconds = details.retryAfterSeconds;
    status.details = d;
  }
  return status;
}

/** Details naming an object by resource, as `NewNotFound` and friends fill them. */
function resourceDetails(res: ServedResource, name: string): Status["details"] {
  return { name, group: res.group, kind: res.plural };
}

/** 404 `volumeattachments.storage.k8s.io "va1" not found`. */
export function notFound(res: ServedResource, name: string): StatusError {
  return new StatusError(
    failureStatus(
      404,
      "NotFound",
      `${qualifiedResource(res)} "${name}" not found`,
      resourceDetails(res, name),
    ),
  );
}

/** 404 for a URL that names no served resource. */
export function unknownPath(): StatusError {
  return new StatusError(
    failureStatus(404, "NotFound", "the server could not find the requested resource", {}),
  );
}

/** 409 `... "va1" already exists`. */
export function alreadyExists(res: ServedResource, name: string): StatusError {
  return new StatusError(
    failureStatus(
      409,
      "AlreadyExists",
      `${qualifiedResource(res)} "${name}" already exists`,
      resourceDetails(res, name),
    ),
  );
}

/** 409 `Operation cannot be fulfilled on leases.coordination.k8s.io "x": <msg>`. */
export function conflict(
  res: ServedResource,
  name: string,
  msg = OPTIMISTIC_LOCK_MESSAGE,
): StatusError {
  return new StatusError(
    failureStatus(
      409,
      "Conflict",
      `Operation cannot be fulfilled on ${qualifiedResource(res)} "${name}": ${msg}`,
      resourceDetails(res, name),
    ),
  );
}

/** 403 `volumeattachments.storage.k8s.io "x" is forbidden: <msg>` (no name: `... is forbidden`). */
export function forbidden(res: ServedResource, name: string, msg: string): StatusError {
  const what = name === "" ? qualifiedResource(res) : `${qualifiedResource(res)} "${name}"`;
  return new StatusError(
    failureStatus(403, "Forbidden", `${what} is forbidden: ${msg}`, resourceDetails(res, name)),
  );
}

/** One field error of an Invalid answer. */
export interface FieldCause {
  /** `FieldValueForbidden`, `FieldValueRequired`, `FieldValueInvalid`, … */
  reason: string;
  /** The field path, e.g. `metadata.finalizers`. */
  field: string;
  /** The error body, e.g. `Forbidden: no new finalizers ...`. */
  message: string;
}

/** 422 `VolumeAttachment.storage.k8s.io "x" is invalid: <field>: <message>` (`NewInvalid`). */
export function invalid(res: ServedResource, name: string, causes: FieldCause[]): StatusError {
  return invalidObject(res.group, res.kind, name, causes);
}

/**
 * 422 for a list or watch request whose options do not validate (`ValidateListOptions`):
 * `ListOptions.meta.k8s.io "" is invalid: <field>: <message>`.
 */
export function invalidListOptions(causes: FieldCause[]): StatusError {
  return invalidObject("meta.k8s.io", "ListOptions", "", causes);
}

/**
 * `NewInvalid`: every cause is kept in the details, while the message lists each distinct text
 * once (`ErrorList.ToAggregate`), bracketed when there are several.
 */
function invalidObject(
  group: string,
  kind: string,
  name: string,
  causes: FieldCause[],
): StatusError {
  const texts = [
    ...new Set(causes.map((c) => c.field === "" ? c.message : `${c.field}: ${c.message}`)),
  ];
  const joined = texts.length === 1 ? texts[0] : `[${texts.join(", ")}]`;
  const qualified = group === "" ? kind : `${kind}.${group}`;
  return new StatusError(
    failureStatus(422, "Invalid", `${qualified} "${name}" is invalid: ${joined}`, {
      name,
      group,
      kind,
      causes,
    }),
  );
}

/**
 * 422 `volumeattachments.storage.k8s.io "x" is invalid: metadata.resourceVersion: Invalid value:
 * 0: must be specified for an update`: an update without resourceVersion on a resource that takes
 * no unconditional update. The generic registry names the resource, not the kind, here.
 */
export function resourceVersionRequired(res: ServedResource, name: string): StatusError {
  const message = "Invalid value: 0: must be specified for an update";
  return new StatusError(
    failureStatus(
      422,
      "Invalid",
      `${qualifiedResource(res)} "${name}" is invalid: metadata.resourceVersion: ${message}`,
      {
        name,
        group: res.group,
        kind: res.plural,
        causes: [{ reason: "FieldValueInvalid", field: "metadata.resourceVersion", message }],
      },
    ),
  );
}

/**
 * 422 for a JSON patch that does not apply (failed `test`, missing path). The API server answers
 * with `NewGenericServerResponse(422, "", GroupResource{}, "", err, 0, false)`, which keeps the
 * library's error out of the message: kubectl prints "The request is invalid: the server rejected
 * our request due to an error in our request".
 */
export function patchNotApplied(): StatusError {
  return new StatusError(
    failureStatus(
      422,
      "Invalid",
      "the server rejected our request due to an error in our request",
      {},
    ),
  );
}

/** 400 BadRequest with the given message. */
export function badRequest(msg: string): StatusError {
  return new StatusError(failureStatus(400, "BadRequest", msg));
}

/** 405 for a verb the resource does not support. */
export function methodNotAllowed(): StatusError {
  return new StatusError(
    failureStatus(
      405,
      "MethodNotAllowed",
      "the server does not allow this method on the requested resource",
      {},
    ),
  );
}

/**
 * 415 for a create or update body of another media type: `the body of the request was in an
 * unknown format - accepted media types include: ...` (the handler's content negotiation).
 */
export function unsupportedMediaType(accepted: readonly string[]): StatusError {
  return new StatusError(
    failureStatus(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: ${
        accepted.join(", ")
      }`,
    ),
  );
}

/**
 * 415 `415: Unsupported Media Type` with empty details: a PATCH of a type no route consumes is
 * refused by the router before any handler runs.
 */
export function unsupportedPatchType(): StatusError {
  return new StatusError(
    failureStatus(415, "UnsupportedMediaType", "415: Unsupported Media Type", {}),
  );
}

/** 410 Expired `too old resource version: N (M)`, as the watch cache answers. */
export function resourceExpired(requested: number, oldest: number): StatusError {
  return new StatusError(
    failureStatus(410, "Expired", `too old resource version: ${requested} (${oldest})`),
  );
}

/**
 * 410 Expired for a list `continue` token whose resourceVersion was compacted, as the etcd3
 * store words it (`handleCompactedErrorForPaging` in `apiserver/pkg/storage/etcd3/store.go`):
 * the message ends with a token that continues the list, inconsistently, at the latest state.
 */
export function continueExpired(inconsistentToken: string): StatusError {
  return new StatusError(
    failureStatus(
      410,
      "Expired",
      "The provided continue parameter is too old to display a consistent list result. You " +
        "can start a new list without the continue parameter, or use the continue token in " +
        "this response to retrieve the remainder of the results. Continuing with the provided " +
        "token results in an inconsistent list - objects that were created, modified, or " +
        "deleted between the time the first chunk was returned and now may show up in the " +
        "list." + inconsistentToken,
    ),
  );
}

/** 400 for a `continue` token that cannot be decoded. */
export function invalidContinue(detail: string): StatusError {
  return badRequest(`continue key is not valid: ${detail}`);
}

/**
 * The error a real server would give with HTTP `code` for a request on `name`, used by fault
 * injection: e.g. 403 gives `<resource>.<group> "<name>" is forbidden: <msg>`, 500 gives
 * `Internal error occurred: <msg>`, 409 gives `Operation cannot be fulfilled on ...: <msg>`.
 */
export function errorForCode(
  code: number,
  res: ServedResource,
  name: string,
  msg: string | undefined,
): StatusError {
  switch (code) {
    case 400:
      return badRequest(msg ?? "bad request");
    case 401:
      return new StatusError(failureStatus(401, "Unauthorized", msg ?? "Unauthorized"));
    case 403:
      return forbidden(res, name, msg ?? "Mock error");
    case 404:
      return notFound(res, name);
    case 409:
      return conflict(res, name, msg ?? OPTIMISTIC_LOCK_MESSAGE);
    case 410:
      return new StatusError(failureStatus(410, "Expired", msg ?? "too old resource version"));
    case 422:
      return invalid(res, name, [{
        reason: "FieldValueInvalid",
        field: "",
        message: msg ?? "mock error",
      }]);
    case 429:
      return new StatusError(
        failureStatus(429, "TooManyRequests", msg ?? "Too many requests, please try again later."),
      );
    case 500:
      return new StatusError(
        failureStatus(500, "InternalError", `Internal error occurred: ${msg ?? "mock error"}`, {
          causes: [{ message: msg ?? "mock error" }],
        }),
      );
    case 503:
      return new StatusError(
        failureStatus(
          503,
          "ServiceUnavailable",
          msg ?? "the server is currently unable to handle the request",
        ),
      );
    case 504:
      return new StatusError(
        failureStatus(
          504,
          "Timeout",
          `Timeout: ${msg ?? "request did not complete within the allowed duration"}`,
        ),
      );
    default:
      return new StatusError(failureStatus(code, "Unknown", msg ?? `mock error ${code}`));
  }
}

/**
 * `strconv.ParseUint(value, 10, 64)`'s error as a field error of `resourceVersion`, or undefined
 * when `value` is a resourceVersion.
 */
export function resourceVersionParseError(value: string): string | undefined {
  if (/^[0-9]+$/.test(value) && BigInt(value) <= 18446744073709551615n) return undefined;
  const why = /^[0-9]+$/.test(value) ? "value out of range" : "invalid syntax";
  return `resourceVersion: Invalid value: ${JSON.stringify(value)}: strconv.ParseUint: parsing ` +
    `${JSON.stringify(value)}: ${why}`;
}

/** 400 for a list whose resourceVersion is not a number. */
export function invalidListResourceVersion(parseError: string): StatusError {
  return badRequest(`invalid resource version: ${parseError}`);
}

/**
 * 500 for a watch whose resourceVersion is not a number: the watch handler answers the parse
 * error as an internal error, with no reason.
 */
export function invalidWatchResourceVersion(parseError: string): StatusError {
  return new StatusError({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: parseError,
    code: 500,
  });
}

/**
 * 504 `Timeout: Too large resource version: N, current: M`: a list asked for a resourceVersion
 * the server had not reached within 3 s. Sent with `Retry-After: 1`.
 */
export function resourceVersionTooLarge(requested: string, current: number): StatusError {
  return new StatusError(
    failureStatus(
      504,
      "Timeout",
      `Timeout: Too large resource version: ${requested}, current: ${current}`,
      {
        causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
        retryAfterSeconds: 1,
      },
    ),
  );
}
