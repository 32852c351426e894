/**
 * Turning a CSI driver name (or a host name) into text a Kubernetes object name accepts, as
 * csi-lib-utils' `leaderelection.sanitizeName` and external-attacher's `SanitizeDriverName`
 * (`pkg/controller/util.go`) do. It sits directly in `lib/` because both the controller (the
 * finalizer and Lease names) and the leader election (the replica identity) use it, and neither
 * may import the other.
 *
 * @module
 */

/**
 * Replaces every character outside `[a-zA-Z0-9-]` with `-`; a trailing `-` gets an `X` appended
 * (a Kubernetes name may not end with `-`).
 *
 * @example
 * ```ts
 * sanitizeDriverName("csi/test"); // "csi-test"
 * sanitizeDriverName("trailing\\"); // "trailing-X"
 * ```
 */
export function sanitizeDriverName(driver: string): string {
  const name = driver.replace(/[^a-zA-Z0-9-]/g, "-");
  return name.endsWith("-") ? `${name}X` : name;
}
