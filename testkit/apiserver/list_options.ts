/**
 * The query parameters of a list or watch as kube-apiserver v1.37.2 reads them: Go's query
 * conversion of booleans, the WatchList defaulting (`SetListOptionsDefaults`, on by default since
 * v1.34) and `ValidateListOptions`, with the real field errors.
 *
 * @module
 */

import type { FieldCause } from "./status_errors.ts";

/** The options of a list or watch request that the fake API server acts on. */
export interface ListOptions {
  watch: boolean;
  resourceVersion: string;
  /** "" when not given. */
  resourceVersionMatch: string;
  /** Undefined when not given (and not defaulted). */
  sendInitialEvents?: boolean;
  allowWatchBookmarks: boolean;
  /** "" when not given. */
  continue: string;
  /** Page size; 0 when not given (no pagination). */
  limit: number;
}

/**
 * A boolean query parameter as `Convert_Slice_string_To_bool` reads it: absent is false; `0`,
 * `f` and `false` (any case) are false; anything else, even "", is true.
 */
function queryBool(value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  return !(value === "0" || /^(f|false)$/i.test(value));
}

/**
 * The options of `query`, with the real server's defaulting: a watch from resourceVersion "" or
 * "0" that sets neither `sendInitialEvents` nor `resourceVersionMatch` becomes a watch list
 * (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`), so with bookmarks allowed it
 * ends its initial events with the `k8s.io/initial-events-end` bookmark.
 */
export function parseListOptions(query: Record<string, string>): ListOptions {
  const opts: ListOptions = {
    watch: queryBool(query.watch) ?? false,
    resourceVersion: query.resourceVersion ?? "",
    resourceVersionMatch: query.resourceVersionMatch ?? "",
    allowWatchBookmarks: queryBool(query.allowWatchBookmarks) ?? false,
    continue: query.continue ?? "",
    limit: /^[0-9]+$/.test(query.limit ?? "") ? Number(query.limit) : 0,
  };
  const send = queryBool(query.sendInitialEvents);
  if (send !== undefined) opts.sendInitialEvents = send;
  if (
    opts.watch && send === undefined && opts.resourceVersionMatch === "" &&
    (opts.resourceVersion === "" || opts.resourceVersion === "0")
  ) {
    opts.sendInitialEvents = true;
    opts.resourceVersionMatch = "NotOlderThan";
  }
  return opts;
}

function forbidden(field: string, detail: string): FieldCause {
  return { reason: "FieldValueForbidden", field, message: `Forbidden: ${detail}` };
}

function notSupported(field: string, value: string, supported: string[]): FieldCause {
  return {
    reason: "FieldValueNotSupported",
    field,
    message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${
      supported.map((s) => JSON.stringify(s)).join(", ")
    }`,
  };
}

/** `ValidateListOptions` with the WatchList feature on: the field errors of `opts`, in order. */
export function validateListOptions(opts: ListOptions): FieldCause[] {
  const causes: FieldCause[] = [];
  const match = opts.resourceVersionMatch;
  const field = "resourceVersionMatch";
  if (opts.watch) {
    if (opts.sendInitialEvents !== undefined && match !== "NotOlderThan") {
      causes.push(
        forbidden(field, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"),
      );
    }
    if (match !== "") {
      if (opts.sendInitialEvents === undefined) {
        causes.push(
          forbidden(
            field,
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
          ),
        );
      }
      if (match !== "NotOlderThan") causes.push(notSupported(field, match, ["NotOlderThan"]));
      if (opts.continue !== "") {
        causes.push(
          forbidden(field, "resourceVersionMatch is forbidden when continue is provided"),
        );
      }
    }
    return causes;
  }
  if (match !== "") {
    if (opts.resourceVersion === "") {
      causes.push(
        forbidden(field, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
      );
    }
    if (opts.continue !== "") {
      causes.push(forbidden(field, "resourceVersionMatch is forbidden when continue is provided"));
    }
    if (match !== "Exact" && match !== "NotOlderThan") {
      causes.push(notSupported(field, match, ["Exact", "NotOlderThan", ""]));
    }
    if (match === "Exact" && opts.resourceVersion === "0") {
      causes.push(
        forbidden(field, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
      );
    }
  }
  if (opts.sendInitialEvents !== undefined) {
    causes.push(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
  }
  return causes;
}
