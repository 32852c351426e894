/**
 * The part of kube-apiserver's object validation (`pkg/apis/storage/validation`) that the fake
 * API server applies to creates and updates over HTTP. Objects stored directly as test setup are
 * not validated, so tests may seed any state.
 *
 * Deliberately partial: only required fields are checked. The format checks of the real server
 * (e.g. that `spec.attacher` is an RFC 1123 subdomain) are left out because callers use names
 * such as `csi/test`; the one format error the real server reports for an empty attacher is kept,
 * since it always comes with the Required error.
 *
 * @module
 */

import type { FieldCause } from "./status_errors.ts";

/** The message of `IsDNS1123Subdomain` for a value that is not a lowercase RFC 1123 subdomain. */
export const DNS1123_SUBDOMAIN_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or " +
  "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used " +
  "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A string member, "" when absent or not a string. */
function stringAt(obj: Record<string, unknown>, key: string): string {
  const v = obj[key];
  return typeof v === "string" ? v : "";
}

/**
 * The field errors of a VolumeAttachment, in the real server's order: a missing `spec.attacher`
 * (Required, then the RFC 1123 error for ""), then a missing `spec.nodeName` (Required).
 */
export function validateVolumeAttachment(obj: Record<string, unknown>): FieldCause[] {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const causes: FieldCause[] = [];
  if (stringAt(spec, "attacher") === "") {
    causes.push({
      reason: "FieldValueRequired",
      field: "spec.attacher",
      message: "Required value",
    });
    causes.push({
      reason: "FieldValueInvalid",
      field: "spec.attacher",
      message: `Invalid value: "": ${DNS1123_SUBDOMAIN_MESSAGE}`,
    });
  }
  if (stringAt(spec, "nodeName") === "") {
    causes.push({
      reason: "FieldValueRequired",
      field: "spec.nodeName",
      message: "Required value",
    });
  }
  return causes;
}
