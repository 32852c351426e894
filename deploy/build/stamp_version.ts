/**
 * `deno run --allow-run=git --allow-read --allow-write=dist --allow-env stamp_version.ts <dir>`:
 * stamps the version into the bundle in `<dir>` (every `.js` file), replacing
 * {@link VERSION_PLACEHOLDER} of `lib/version.ts`. Run by the `bundle` and `compile` tasks between
 * `deno bundle` and `deno compile`, so the executable and `/statusz` carry it.
 *
 * The version is `CSI_ATTACHER_VERSION` when set (a container build has no `.git`: the
 * Containerfile passes its build argument), else the repository's, as the Go sidecars' release
 * tooling takes it (kubernetes-csi/csi-release-tools `build.make`: `git describe --long --tags
 * --match='v*' --dirty`, the commit when no tag matches): `v0.1.0-3-g1a2b3c4[-dirty]`, or
 * `v0.1.0-g1a2b3c4[-dirty]` (the base version and the commit) in a repository without tags.
 *
 * @module
 */

import { BASE_VERSION, VERSION_PLACEHOLDER } from "../../lib/version.ts";

/** A version as it may appear in a JavaScript string literal, a User-Agent and a log line. */
const VERSION_SHAPE = /^[0-9A-Za-z][0-9A-Za-z.+_-]*$/;

async function git(args: string[], cwd: string): Promise<string | undefined> {
  try {
    const out = await new Deno.Command("git", { args, cwd, stdout: "piped", stderr: "null" })
      .output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : undefined;
  } catch {
    return undefined; // no git
  }
}

/**
 * The version of the checkout at `repo`: `git describe --long --tags --match=v* --dirty`, else
 * `<BASE_VERSION>-g<short commit>[-dirty]`; undefined outside a git checkout.
 */
export async function repositoryVersion(repo: string): Promise<string | undefined> {
  const described = await git(["describe", "--long", "--tags", "--match=v*", "--dirty"], repo);
  if (described !== undefined && described !== "") return described;
  const commit = await git(["rev-parse", "--short=7", "HEAD"], repo);
  if (commit === undefined || commit === "") return undefined;
  const dirty = await git(["status", "--porcelain", "--untracked-files=no"], repo);
  return `${BASE_VERSION}-g${commit}${dirty ? "-dirty" : ""}`;
}

/**
 * Replaces the placeholder with `version` in every `.js` file under `dir`.
 *
 * @returns how many files held it.
 * @throws {TypeError} when `version` has characters a version does not have.
 */
export async function stampDir(dir: string, version: string): Promise<number> {
  if (!VERSION_SHAPE.test(version)) {
    throw new TypeError(`Cannot stamp the version: ${JSON.stringify(version)} is not a version`);
  }
  let stamped = 0;
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) {
      stamped += await stampDir(path, version);
    } else if (entry.name.endsWith(".js")) {
      const text = await Deno.readTextFile(path);
      if (!text.includes(VERSION_PLACEHOLDER)) continue;
      await Deno.writeTextFile(path, text.replaceAll(VERSION_PLACEHOLDER, version));
      stamped++;
    }
  }
  return stamped;
}

if (import.meta.main) {
  const dir = Deno.args[0];
  if (dir === undefined) throw new Error("usage: stamp_version.ts <bundle directory>");
  const repo = new URL("../../", import.meta.url).pathname;
  const version = Deno.env.get("CSI_ATTACHER_VERSION") || await repositoryVersion(repo) ||
    `${BASE_VERSION}-unknown`;
  const files = await stampDir(dir, version);
  if (files === 0) throw new Error(`Cannot stamp the version: no file in ${dir} holds it`);
  console.log(`stamped ${version} into ${files} file(s) of ${dir}`);
}
