/**
 * The part of kube-apiserver's object validation that the fake API server applies to writes over
 * HTTP, with the real server's field paths, reasons, messages and order. Objects stored directly
 * as test setup are not validated, so tests may seed any state (the Go attacher's scenarios use the
 * driver name `csi/test`, which the real server refuses on create).
 *
 * Covered: `metadata.name` of every served resource (an RFC 1123 subdomain, as the registries of
 * all of them require); for VolumeAttachments everything of `pkg/apis/storage/validation`
 * except the inline volume spec: on create `ValidateVolumeAttachment` followed by the v1 checks
 * (`spec.attacher` as a CSI driver name, the PersistentVolume name), on update
 * `ValidateVolumeAttachment` and the immutable `spec`. Not covered: labels, annotations and the
 * other metadata rules, the inline PersistentVolume spec, and the specs of the other resources.
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
 * `ValidateVolumeAttachment` (create and update): `spec.attacher` present, one source,
 * `spec.nodeName` an RFC 1123 subdomain, in that order.
 */
export function validateVolumeAttachment(obj: Record<string, unknown>): FieldCause[] {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const causes: FieldCause[] = [];
  if (stringAt(spec, "attacher") === "") causes.push(required("spec.attacher"));
  causes.push(...sourceCauses(spec));
  causes.push(...subdomainCauses("spec.nodeName", stringAt(spec, "nodeName")));
  return causes;
}

/**
 * `ValidateVolumeAttachmentV1`, the checks only a create of a `storage.k8s.io/v1` object gets:
 * `spec.attacher` as a CSI driver name (`ValidateCSIDriverName`: present, at most 63 bytes, an
 * RFC 1123 subdomain once lowercased) and the PersistentVolume name as a subdomain.
 */
export function validateVolumeAttachmentV1(obj: Record<string, unknown>): FieldCause[] {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const attacher = stringAt(spec, "attacher");
  const causes: FieldCause[] = [];
  if (attacher === "") causes.push(required("spec.attacher"));
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
  const source = isObject(spec.source) ? spec.source : {};
  if (typeof source.persistentVolumeName === "string") {
    causes.push(
      ...subdomainCauses("spec.source.persistentVolumeName", source.persistentVolumeName),
    );
  }
  return causes;
}

/** The errors of a VolumeAttachment created over HTTP. */
export function validateVolumeAttachmentCreate(obj: Record<string, unknown>): FieldCause[] {
  return [...validateVolumeAttachment(obj), ...validateVolumeAttachmentV1(obj)];
}

/**
 * The errors of a VolumeAttachment updated over HTTP (PUT or patch of the main resource):
 * {@link validateVolumeAttachment} twice, then `spec: Invalid value: ...: field is immutable` when the
 * spec changed. The value is printed as the real server prints the internal Go struct (field
 * names capitalized); an inline volume spec is printed as sent.
 */
export function validateVolumeAttachmentUpdate(
  next: Record<string, unknown>,
  old: Record<string, unknown>,
): FieldCause[] {
  // The strategy validates the object, then `ValidateVolumeAttachmentUpdate` validates it again
  // before comparing the specs: every error of the object comes twice.
  const causes = [...validateVolumeAttachment(next), ...validateVolumeAttachment(next)];
  const spec = isObject(next.spec) ? next.spec : {};
  const oldSpec = isObject(old.spec) ? old.spec : {};
  if (!jsonEqual(spec, oldSpec)) {
    causes.push({
      reason: "FieldValueInvalid",
      field: "spec",
      message: `Invalid value: ${goSpecString(spec)}: field is immutable`,
    });
  }
  return causes;
}

/** The internal `storage.VolumeAttachmentSpec` as the real server prints it in a field error. */
function goSpecString(spec: Record<string, unknown>): string {
  const source = isObject(spec.source) ? spec.source : {};
  return JSON.stringify({
    Attacher: stringAt(spec, "attacher"),
    Source: {
      PersistentVolumeName: typeof source.persistentVolumeName === "string"
        ? source.persistentVolumeName
        : null,
      InlineVolumeSpec: isObject(source.inlineVolumeSpec) ? source.inlineVolumeSpec : null,
    },
    NodeName: stringAt(spec, "nodeName"),
  });
}
