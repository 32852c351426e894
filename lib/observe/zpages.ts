/**
 * The z-pages `/statusz` and `/flagz` in the plain-text form Kubernetes components serve them
 * (KEP-4827 "Component Statusz", KEP-4828 "Component Flagz"; component-base `zpages/statusz/
 * statusz.go` and `zpages/flagz/flagz.go`): a header naming the component, the warning that the
 * text is for people, not machines, then `Started`, `Up`, the versions and the paths served, or
 * every flag as `name=value`, sorted.
 *
 * Differences from component-base: the runtime is Deno, so `Go version` reads `Runtime version`;
 * there is no emulation version; the delimiter is always `:` (statusz) and `=` (flagz) where
 * component-base picks one at random to discourage parsing (the warning says the same); the
 * structured JSON form (`Accept: application/json;…;as=Statusz`) is not served.
 *
 * No flag of the attacher holds a credential; a flag marked `classified` reads `CLASSIFIED`
 * (`../cli/flags.ts`), and any `user:password@` inside a URL-like value is masked here too.
 *
 * @module
 */

/** The warning line component-base prints under the header of both pages. */
export const ZPAGES_WARNING = "Warning: This endpoint is not meant to be machine parseable, " +
  "has no formatting compatibility guarantees and is for debugging purposes only.";

/** What `/statusz` shows. */
export interface StatuszInfo {
  /** The component's name in the header, e.g. `csi-attacher`. */
  component: string;
  /** Wall-clock start time of the process (ms since the epoch). */
  startTimeMs: number;
  /** How long the process has run (ms, from the monotonic clock). */
  uptimeMs: number;
  /** The program's version, e.g. `0.1.0`. */
  binaryVersion: string;
  /** The runtime's version, e.g. `deno 2.9.6 (V8 14.0, TypeScript 5.9)`. */
  runtimeVersion: string;
  /** The paths the HTTP endpoint serves. */
  paths: readonly string[];
}

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** Go's `time.UnixDate` layout in UTC: `Wed Oct 16 21:03:43 UTC 2024` (day padded with a space). */
export function unixDate(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${DAYS[d.getUTCDay()]} ${MONTHS[d.getUTCMonth()]} ${
    String(d.getUTCDate()).padStart(2, " ")
  } ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${
    two(d.getUTCSeconds())
  } UTC ${d.getUTCFullYear()}`;
}

/** component-base's uptime text: `0 hr 00 min 16 sec` (whole seconds, hours unbounded). */
export function uptimeText(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const two = (n: number) => String(n).padStart(2, "0");
  return `${Math.floor(s / 3600)} hr ${two(Math.floor(s / 60) % 60)} min ${two(s % 60)} sec`;
}

/** The `/statusz` text. */
export function statuszText(info: StatuszInfo): string {
  return `\n${info.component} statusz\n${ZPAGES_WARNING}\n\n` +
    `Started: ${unixDate(info.startTimeMs)}\n` +
    `Up: ${uptimeText(info.uptimeMs)}\n` +
    `Runtime version: ${info.runtimeVersion}\n` +
    `Binary version: ${info.binaryVersion}\n` +
    `Paths: ${[...info.paths].sort().join(" ")}\n`;
}

/** `scheme://user:password@host…` with the user information replaced. */
export function maskUserInfo(value: string): string {
  return value.replace(/([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)[^/@\s]+@/g, "$1CLASSIFIED@");
}

/** The `/flagz` text: every flag as `name=value`, sorted by name. */
export function flagzText(
  component: string,
  flags: readonly { name: string; value: string }[],
): string {
  const lines = [...flags].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
    .map((f) => `${f.name}=${maskUserInfo(f.value)}\n`);
  return `\n${component} flags\n${ZPAGES_WARNING}\n\n${lines.join("")}`;
}

/**
 * Whether an `Accept` header lets the plain-text pages answer (component-base
 * `zpages/httputil.AcceptableMediaType`): absent, or a `text/plain`, `text/*` or `*\/*` range
 * with no parameter but `charset=utf-8`.
 */
export function acceptsPlainText(accept: string | null): boolean {
  if (accept === null || accept.trim() === "") return true;
  return accept.split(",").some((range) => {
    const [type, ...params] = range.split(";").map((p) => p.trim().toLowerCase());
    if (type !== "text/plain" && type !== "text/*" && type !== "*/*") return false;
    const rest = params.filter((p) => !/^q=/.test(p));
    return rest.length === 0 || (rest.length === 1 && /^charset="?utf-8"?$/.test(rest[0]!));
  });
}
