/**
 * The part of kube-apiserver v1.37's object validation that the fake API server applies to writes
 * over HTTP, with the real server's field paths, reasons, messages and order. Objects stored
 * directly as test setup are not validated, so tests may seed any state (the Go attacher's
 * scenarios use the driver name `csi/test`, which the real server refuses on create).
 *
 * Covered: `metadata.name` of every served resource (an RFC 1123 subdomain, as the registries of
 * all of them require); for VolumeAttachments everything of kubernetes `pkg/apis/storage/validation`
 * (`ValidateVolumeAttachment`, `ValidateVolumeAttachmentUpdate`) except the inline volume spec,
 * merged with the declarative validation of `spec` and `spec.attacher`, which is beta and enforced
 * from v1.37 on (before, the handwritten errors alone; up to v1.35 a v1 create check validated
 * `spec.attacher` a second time). Not covered: labels, annotations and the other metadata rules, the inline
 * PersistentVolume spec, and the specs of the other resources.
 *
 * @module
 */

import { jsonEqual } from "../../lib/kube/patches.ts";
import type { FieldCause } from "./status_errors.ts";

/** `IsDNS1123Subdomain`'s regular-expression error for a value that is not a subdomain. */
export const DNS1123_SUBDOMAIN_MESSAGE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or " +
  "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used " +
  "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * `IsDNS1123SubdomainCaseless`'s regular-expression error (apimachinery
 * `pkg/api/validate/content/dns.go`): the example capitalized, the regex shown the lowercase one.
 */
export const DNS1123_SUBDOMAIN_CASELESS_MESSAGE =
  "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start " +
  "and end with an alphanumeric character (e.g. 'Example.com', regex used for validation is " +
  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const DNS1123_SUBDOMAIN_CASELESS =
  /^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$/;

/** Longest RFC 1123 subdomain. */
const DNS1123_SUBDOMAIN_MAX = 253;

/** Longest CSI driver name (`ValidateCSIDriverName`). */
const CSI_DRIVER_NAME_MAX = 63;

/** The message of a VolumeAttachment source that names no volume or two. */
const EXACTLY_ONE_SOURCE = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A string member, "" when absent or not a string. */
function stringAt(obj: Record<string, unknown>, key: string): string {
  const v = obj[key];
  return typeof v === "string" ? v : "";
}

/** `IsDNS1123Subdomain`: the reasons `value` is not an RFC 1123 subdomain (none when it is). */
export function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > DNS1123_SUBDOMAIN_MAX) {
    errs.push(`must be no more than ${DNS1123_SUBDOMAIN_MAX} characters`);
  }
  if (!DNS1123_SUBDOMAIN.test(value)) errs.push(DNS1123_SUBDOMAIN_MESSAGE);
  return errs;
}

/** `field.Invalid(path, value, detail)` for a string value. */
function invalidString(field: string, value: string, detail: string): FieldCause {
  return {
    reason: "FieldValueInvalid",
    field,
    message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
  };
}

/** `field.Required(path, detail)`. */
function required(field: string, detail = ""): FieldCause {
  return {
    reason: "FieldValueRequired",
    field,
    message: detail === "" ? "Required value" : `Required value: ${detail}`,
  };
}

/** One `Invalid` cause per reason `value` is not an RFC 1123 subdomain. */
function subdomainCauses(field: string, value: string): FieldCause[] {
  return dns1123SubdomainErrors(value).map((msg) => invalidString(field, value, msg));
}

/**
 * The errors of `metadata.name` on create (`ValidateObjectMeta` with `NameIsDNSSubdomain`, the
 * name rule of every served resource). An empty name is reported by the caller with the
 * "name or generateName is required" text, as the real server does.
 */
export function validateObjectName(name: string): FieldCause[] {
  return name === "" ? [] : subdomainCauses("metadata.name", name);
}

/** `validateVolumeAttachmentSource`, without the inline PersistentVolume spec. */
function sourceCauses(spec: Record<string, unknown>): FieldCause[] {
  const source = isObject(spec.source) ? spec.source : {};
  const pvName = source.persistentVolumeName;
  const hasPv = typeof pvName === "string";
  const hasInline = isObject(source.inlineVolumeSpec);
  if (!hasPv && !hasInline) return [required("spec.source", EXACTLY_ONE_SOURCE)];
  if (hasPv && hasInline) {
    return [{
      reason: "FieldValueForbidden",
      field: "spec.source",
      message: `Forbidden: ${EXACTLY_ONE_SOURCE}`,
    }];
  }
  if (hasPv && pvName === "") {
    return [
      required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"),
    ];
  }
  return [];
}

/**
 * The declarative validation of `spec.attacher` (kubernetes `pkg/apis/storage/v1`
 * `zz_generated.validations.go`, `Validate_VolumeAttachmentSpec`; beta and enforced from v1.37):
 * required, short-circuiting; else the caseless subdomain format (`k8s-long-name-caseless`,
 * apimachinery `pkg/api/validate/content` `IsDNS1123SubdomainCaseless`, whose length message
 * says bytes where the handwritten one says characters) and at most 63 characters
 * (`validate.MaxLength`, counted in characters).
 */
function declarativeAttacherCauses(attacher: string): FieldCause[] {
  if (attacher === "") return [required("spec.attacher")];
  const causes: FieldCause[] = [];
  if (attacher.length > DNS1123_SUBDOMAIN_MAX) {
    causes.push(
      invalidString(
        "spec.attacher",
        attacher,
        `must be no more than ${DNS1123_SUBDOMAIN_MAX} bytes`,
      ),
    );
  }
  if (!DNS1123_SUBDOMAIN_CASELESS.test(attacher)) {
    causes.push(invalidString("spec.attacher", attacher, DNS1123_SUBDOMAIN_CASELESS_MESSAGE));
  }
  if ([...attacher].length > CSI_DRIVER_NAME_MAX) {
    causes.push({
      reason: "FieldValueTooLong",
      field: "spec.attacher",
      message: `Too long: may not be more than ${CSI_DRIVER_NAME_MAX} characters`,
    });
  }
  return causes;
}

/**
 * The handwritten `ValidateCSIDriverName` of `spec.attacher` (required, at most 63 bytes, an
 * RFC 1123 subdomain once lowercased), whose errors the declarative ones cover.
 */
function handwrittenAttacherCauses(attacher: string): FieldCause[] {
  if (attacher === "") return [required("spec.attacher")];
  const causes: FieldCause[] = [];
  if (new TextEncoder().encode(attacher).length > CSI_DRIVER_NAME_MAX) {
    causes.push({
      reason: "FieldValueTooLong",
      field: "spec.attacher",
      message: `Too long: may not be more than ${CSI_DRIVER_NAME_MAX} bytes`,
    });
  }
  for (const msg of dns1123SubdomainErrors(attacher.toLowerCase())) {
    causes.push(invalidString("spec.attacher", attacher, msg));
  }
  return causes;
}

/**
 * The handwritten `ValidateVolumeAttachment` without `spec.attacher`: one source,
 * `spec.nodeName` and the PersistentVolume name as RFC 1123 subdomains, in that order.
 */
function handwrittenCauses(spec: Record<string, unknown>): FieldCause[] {
  const causes = [...sourceCauses(spec)];
  causes.push(...subdomainCauses("spec.nodeName", stringAt(spec, "nodeName")));
  const source = isObject(spec.source) ? spec.source : {};
  if (typeof source.persistentVolumeName === "string") {
    causes.push(
      ...subdomainCauses("spec.source.persistentVolumeName", source.persistentVolumeName),
    );
  }
  return causes;
}

/**
 * The errors of a VolumeAttachment created over HTTP, as kube-apiserver v1.37 reports them
 * (apiserver `pkg/registry/rest/validate.go`, `ValidateDeclarativelyWithMigrationChecks`): the
 * handwritten errors, less those of `spec.attacher` that a declarative error of the same type
 * replaces (on create, all of them), then the declarative errors.
 */
export function validateVolumeAttachmentCreate(obj: Record<string, unknown>): FieldCause[] {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const attacher = stringAt(spec, "attacher");
  const declarative = declarativeAttacherCauses(attacher);
  const kept = handwrittenAttacherCauses(attacher).filter((c) =>
    !declarative.some((d) => d.reason === c.reason)
  );
  return [...kept, ...handwrittenCauses(spec), ...declarative];
}

/**
 * The errors of a VolumeAttachment updated over HTTP (PUT or patch of the main resource), as
 * kube-apiserver v1.37 reports them. When the spec changed: the handwritten errors of the new
 * object (those of `spec.attacher` included: the declarative check of the spec stops at its
 * immutability, so nothing replaces them), then the declarative `spec: Invalid value: null: field
 * is immutable`. An unchanged spec is not checked again, so an object seeded with a driver name
 * that a create over HTTP refuses (which the real server cannot hold) can still be updated.
 */
export function validateVolumeAttachmentUpdate(
  next: Record<string, unknown>,
  old: Record<string, unknown>,
): FieldCause[] {
  const spec = isObject(next.spec) ? next.spec : {};
  const oldSpec = isObject(old.spec) ? old.spec : {};
  if (jsonEqual(spec, oldSpec)) return [];
  return [
    ...handwrittenAttacherCauses(stringAt(spec, "attacher")),
    ...handwrittenCauses(spec),
    {
      reason: "FieldValueInvalid",
      field: "spec",
      message: "Invalid value: null: field is immutable",
    },
  ];
}
