/**
 * The few POSIX path operations the kubeconfig loader needs (`node:path` costs memory at start
 * and the attacher runs on Linux only), with the results of `node:path/posix`.
 *
 * @module
 */

/** True for an absolute POSIX path. */
export function isAbsolute(path: string): boolean {
  return path.startsWith("/");
}

/**
 * The folder of a POSIX path, as `path.dirname` (up to repeated slashes): `.` for a bare name,
 * `/` for the root.
 */
export function dirname(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return path === "" ? "." : "/";
  const slash = trimmed.lastIndexOf("/");
  if (slash < 0) return ".";
  return slash === 0 ? "/" : trimmed.slice(0, slash);
}

/** POSIX paths joined and normalized (`.` and `..` resolved, repeated slashes collapsed). */
export function join(...parts: string[]): string {
  const joined = parts.filter((p) => p !== "").join("/");
  return joined === "" ? "." : normalize(joined);
}

/** An absolute, normalized POSIX path: `path` against `base`, or the working directory. */
export function resolve(base: string, path: string): string {
  if (isAbsolute(path)) return normalize(path);
  const from = isAbsolute(base) ? base : `${Deno.cwd()}/${base}`;
  return normalize(`${from}/${path}`);
}

/** `.` and `..` segments resolved and slashes collapsed, as `path.normalize` on POSIX. */
export function normalize(path: string): string {
  const absolute = isAbsolute(path);
  const out: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
      else if (!absolute) out.push("..");
      continue;
    }
    out.push(segment);
  }
  const body = out.join("/");
  if (absolute) return `/${body}`;
  return body === "" ? "." : body;
}
