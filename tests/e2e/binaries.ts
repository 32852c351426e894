/**
 * The end-to-end suite's third-party programs: kube-apiserver, kube-controller-manager, kubectl and
 * etcd of one Kubernetes release, and the CSI mock driver, built with Go from the pinned modules
 * in `tests/e2e/tools` and cached outside the repository.
 *
 * Each supported minor has its own Go module ({@link KUBERNETES_RELEASES}: `tools/` for the
 * default, `tools/k8s-1.<minor>/` for the others, all written by `pin_kubernetes.ts`) and its own
 * cache directory `<cacheDir>/bin/<release>/`, so switching between minors rebuilds nothing. The
 * mock driver does not depend on the cluster's version: it is built once, from the default module,
 * into `<cacheDir>/bin/mockdriver`.
 *
 * The release's programs that are missing or stale are built by one `go build` invocation, so
 * kube-controller-manager and kubectl, which share most packages with kube-apiserver, mostly link.
 * kubectl is built only when asked for (`deno task cluster` prints it; the suite does not use it).
 *
 * A build is reused while its stamp (a hash of its module's `go.mod` and `go.sum`, the Go version,
 * the package, the build flags and, for the driver, the launcher's source) is unchanged.
 *
 * @module
 */

import { encodeHex, run } from "./exec.ts";

/** One Kubernetes release the suite can run against. */
export interface KubernetesRelease {
  /** `1.37`. */
  minor: string;
  /** `v1.37.2`. */
  version: string;
  /** The Go module that pins it (absolute path, with a trailing slash). */
  toolsDir: string;
}

const TOOLS_DIR = new URL("./tools/", import.meta.url).pathname;

/**
 * The supported minors, newest first: Kubernetes supports its three newest minors
 * (https://kubernetes.io/releases/version-skew-policy/). The first is the default.
 */
export const KUBERNETES_RELEASES: readonly KubernetesRelease[] = [
  { minor: "1.37", version: "v1.37.2", toolsDir: TOOLS_DIR },
  { minor: "1.36", version: "v1.36.3", toolsDir: `${TOOLS_DIR}k8s-1.36/` },
  { minor: "1.35", version: "v1.35.4", toolsDir: `${TOOLS_DIR}k8s-1.35/` },
];

/** The release used unless `E2E_KUBERNETES` names another. */
export const DEFAULT_KUBERNETES: KubernetesRelease = KUBERNETES_RELEASES[0]!;

/**
 * The release `name` stands for: a minor (`1.35`), a release (`1.35.4`, `v1.35.4`), or
 * "" / undefined for {@link DEFAULT_KUBERNETES}.
 *
 * @throws {RangeError} for anything else (the message lists the supported minors).
 */
export function kubernetesRelease(name: string | undefined): KubernetesRelease {
  if (name === undefined || name.trim() === "") return DEFAULT_KUBERNETES;
  const wanted = name.trim().replace(/^v/, "");
  const found = KUBERNETES_RELEASES.find((r) => r.minor === wanted || r.version === `v${wanted}`);
  if (found === undefined) {
    const supported = KUBERNETES_RELEASES.map((r) => `${r.minor} (${r.version})`).join(", ");
    throw new RangeError(`E2E_KUBERNETES: "${name}" is not supported; supported: ${supported}`);
  }
  return found;
}

/** The paths of the built programs. */
export interface Binaries {
  kubeApiserver: string;
  kubeControllerManager: string;
  /** Undefined unless asked for ({@link EnsureBinariesOptions.kubectl}). */
  kubectl?: string;
  etcd: string;
  mockDriver: string;
}

/** How long each `go build` invocation of {@link ensureBinaries} took. */
export interface BuildStep {
  /** The programs it built. */
  programs: string[];
  seconds: number;
}

/** What {@link ensureBinaries} did. */
export interface BuildReport {
  binaries: Binaries;
  release: KubernetesRelease;
  /** True when anything was compiled; false when the cache was used as is. */
  built: boolean;
  /** The builds run (none when everything was cached). */
  steps: BuildStep[];
  /** Wall time of the whole step. */
  seconds: number;
}

/** Options of {@link ensureBinaries}. */
export interface EnsureBinariesOptions {
  /** Cache directory; the programs go to `<cacheDir>/bin`. */
  cacheDir: string;
  /** The `go` command. */
  go: string;
  /** Parallel compile jobs (`go build -p`); the machine is shared, so keep it small. */
  jobs: number;
  /** The release to build; default {@link DEFAULT_KUBERNETES}. */
  release?: KubernetesRelease;
  /** Also build kubectl. */
  kubectl?: boolean;
  /** Progress lines. */
  log: (line: string) => void;
}

/**
 * Linker flags that give the Kubernetes programs their real version (`/version`, `--version`,
 * `kubectl version`), as kubernetes hack/lib/version.sh sets them.
 */
function kubernetesLdflags(version: string): string {
  const [major, minor] = version.slice(1).split(".");
  return [
    `-X k8s.io/component-base/version.gitVersion=${version}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    "-X k8s.io/component-base/version.gitTreeState=clean",
  ].join(" ");
}

type Program = keyof Binaries;

interface Target {
  name: Program;
  /** The file name in the cache directory. */
  file: string;
  pkg: string;
  /** The file `go build -o <dir>/` writes (the package path's last element, or the one before a `/vN`). */
  builtAs: string;
}

const DRIVER: Target = {
  name: "mockDriver",
  file: "mockdriver",
  pkg: "./mockdriver",
  builtAs: "mockdriver",
};

const RELEASE_TARGETS: readonly Target[] = [
  { name: "etcd", file: "etcd", pkg: "go.etcd.io/etcd/server/v3", builtAs: "server" },
  {
    name: "kubeApiserver",
    file: "kube-apiserver",
    pkg: "k8s.io/kubernetes/cmd/kube-apiserver",
    builtAs: "kube-apiserver",
  },
  {
    name: "kubeControllerManager",
    file: "kube-controller-manager",
    pkg: "k8s.io/kubernetes/cmd/kube-controller-manager",
    builtAs: "kube-controller-manager",
  },
  { name: "kubectl", file: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl", builtAs: "kubectl" },
];

interface Build {
  toolsDir: string;
  outDir: string;
  ldflags: string;
  targets: Target[];
}

async function stampOf(goVersion: string, build: Build, target: Target): Promise<string> {
  const parts = [
    await Deno.readTextFile(`${build.toolsDir}go.mod`),
    await Deno.readTextFile(`${build.toolsDir}go.sum`),
    target === DRIVER ? await Deno.readTextFile(`${TOOLS_DIR}mockdriver/main.go`) : "",
    goVersion,
    target.pkg,
    build.ldflags,
  ];
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(parts.join("\0")));
  return encodeHex(new Uint8Array(digest));
}

async function readOr(path: string, fallback: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return fallback;
    throw err;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/**
 * Builds the stale or missing targets of `build` in one `go build` (into a scratch directory,
 * then moved into place with their stamps). Returns the step, or undefined when all were fresh.
 */
async function buildStale(
  options: EnsureBinariesOptions,
  goVersion: string,
  build: Build,
): Promise<BuildStep | undefined> {
  await Deno.mkdir(build.outDir, { recursive: true });
  const stale: { target: Target; stamp: string }[] = [];
  for (const target of build.targets) {
    const stamp = await stampOf(goVersion, build, target);
    const out = `${build.outDir}/${target.file}`;
    if (await exists(out) && (await readOr(`${out}.stamp`, "")) === stamp) continue;
    stale.push({ target, stamp });
  }
  if (stale.length === 0) return undefined;
  const programs = stale.map((s) => s.target.file);
  options.log(`building ${programs.join(", ")} (go build, module ${build.toolsDir})`);
  const t0 = performance.now();
  const scratch = await Deno.makeTempDir({ dir: build.outDir, prefix: ".build-" });
  try {
    const args = ["-n", "10", options.go, "build", "-p", String(options.jobs), "-trimpath"];
    if (build.ldflags !== "") args.push("-ldflags", build.ldflags);
    args.push("-o", `${scratch}/`, ...stale.map((s) => s.target.pkg));
    const result = await run("nice", args, { cwd: build.toolsDir });
    if (!result.ok) {
      throw new Error(`go build ${programs.join(" ")} failed:\n${result.stderr}${result.error}`);
    }
    for (const { target, stamp } of stale) {
      const out = `${build.outDir}/${target.file}`;
      await Deno.rename(`${scratch}/${target.builtAs}`, out);
      await Deno.writeTextFile(`${out}.stamp`, stamp);
    }
  } finally {
    await Deno.remove(scratch, { recursive: true });
  }
  const seconds = (performance.now() - t0) / 1000;
  options.log(`built ${programs.join(", ")} in ${seconds.toFixed(1)} s`);
  return { programs, seconds };
}

/**
 * Builds whatever is missing or stale, at low CPU priority (`nice -n 10`).
 *
 * @throws {Error} when `go` is missing or a build fails (the message carries Go's output).
 */
export async function ensureBinaries(options: EnsureBinariesOptions): Promise<BuildReport> {
  const started = performance.now();
  const release = options.release ?? DEFAULT_KUBERNETES;
  const version = await run(options.go, ["version"]);
  if (!version.ok) {
    throw new Error(`cannot run "${options.go} version": ${version.stderr || version.error}`);
  }
  const goVersion = version.stdout.trim();
  const bin = `${options.cacheDir}/bin`;
  const builds: Build[] = [
    { toolsDir: TOOLS_DIR, outDir: bin, ldflags: "", targets: [DRIVER] },
    {
      toolsDir: release.toolsDir,
      outDir: `${bin}/${release.version}`,
      ldflags: kubernetesLdflags(release.version),
      targets: RELEASE_TARGETS.filter((t) => t.name !== "kubectl" || options.kubectl === true),
    },
  ];
  const steps: BuildStep[] = [];
  const binaries: Partial<Binaries> = {};
  for (const build of builds) {
    const step = await buildStale(options, goVersion, build);
    if (step !== undefined) steps.push(step);
    for (const target of build.targets) binaries[target.name] = `${build.outDir}/${target.file}`;
  }
  return {
    binaries: binaries as Binaries,
    release,
    built: steps.length > 0,
    steps,
    seconds: (performance.now() - started) / 1000,
  };
}
