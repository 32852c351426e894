/**
 * Builds the Go `csi-attacher` (kubernetes-csi/external-attacher) from the Go module proxy into
 * `<cache dir>/bin/csi-attacher-<version>` (the benchmark's is `~/.cache/csi-attacher-bench`, the
 * end-to-end suite's rolling-update scenario uses its own cache directory), never into the
 * repository, at low priority (`nice -n 10`, `go build -p 1` unless told otherwise), and prints
 * the binary's path. An existing binary is reused.
 *
 * `go install …/cmd/csi-attacher@<version>` does not work: the module's go.mod has `replace`
 * directives, which `go install pkg@version` refuses. So the module source is fetched with
 * `go mod download`, copied to a writable directory and built there with `-mod=mod`.
 *
 * Usage: `deno run -A bench/build_go_attacher.ts [version]` (default {@link DEFAULT_VERSION}).
 *
 * @module
 */

const MODULE = "github.com/kubernetes-csi/external-attacher/v4";

/** The newest release on the module proxy when this was written. */
export const DEFAULT_VERSION = "v4.13.0";

/** Options of {@link buildGoAttacher}. */
export interface BuildGoAttacherOptions {
  /** The `go` command; default `go` on PATH. */
  go?: string;
  /** `go build -p`; default 1. */
  jobs?: number;
}

async function run(cmd: string, args: string[], opts: { cwd?: string } = {}): Promise<string> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: opts.cwd,
    env: { GOFLAGS: "-mod=mod" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed:\n${text.decode(out.stderr)}`);
  }
  return text.decode(out.stdout);
}

/** Builds (or finds) the binary for `version`; resolves with its path. */
export async function buildGoAttacher(
  version: string,
  cacheDir: string,
  options: BuildGoAttacherOptions = {},
): Promise<string> {
  const go = options.go ?? "go";
  if (!/^v\d+\.\d+\.\d+$/.test(version)) {
    throw new TypeError(`Cannot build csi-attacher: bad version "${version}"`);
  }
  const binary = `${cacheDir}/bin/csi-attacher-${version}`;
  try {
    await Deno.stat(binary);
    return binary;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const info = JSON.parse(
    await run(go, ["mod", "download", "-json", `${MODULE}@${version}`]),
  ) as {
    Dir: string;
  };
  const src = `${cacheDir}/src/external-attacher-${version}`;
  await Deno.remove(src, { recursive: true }).catch((err: unknown) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.mkdir(`${cacheDir}/src`, { recursive: true });
  await Deno.mkdir(`${cacheDir}/bin`, { recursive: true });
  await run("cp", ["-r", info.Dir, src]);
  await run("chmod", ["-R", "u+w", src]);
  await run("nice", [
    "-n",
    "10",
    go,
    "build",
    "-p",
    String(options.jobs ?? 1),
    "-ldflags",
    `-X main.version=${version}`,
    "-o",
    binary,
    "./cmd/csi-attacher",
  ], { cwd: src });
  return binary;
}

if (import.meta.main) {
  const version = Deno.args[0] ?? DEFAULT_VERSION;
  const home = Deno.env.get("HOME");
  if (home === undefined) {
    console.error("HOME is not set");
    Deno.exit(1);
  }
  console.log(await buildGoAttacher(version, `${home}/.cache/csi-attacher-bench`));
}
