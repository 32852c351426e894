/**
 * The end-to-end suite's third-party programs: kube-apiserver, kube-controller-manager, kubectl,
 * etcd and the CSI mock driver, built with Go from the pinned module in `tests/e2e/tools` and
 * cached outside the repository. kube-controller-manager and kubectl share most of their packages
 * with kube-apiserver, so after the first program the others mostly link.
 *
 * A build is reused while its stamp (a hash of `go.mod`, `go.sum`, the Go version, the build flags
 * and, for the driver, the launcher's source) is unchanged, so only the first run pays for the build.
 *
 * @module
 */

import { encodeHex, run, runOk } from "./exec.ts";

/** The kube-apiserver release the tool module pins (its `k8s.io/*` staging modules are v0.34.4). */
export const KUBERNETES_VERSION = "v1.34.4";

/** The paths of the built programs. */
export interface Binaries {
  kubeApiserver: string;
  kubeControllerManager: string;
  kubectl: string;
  etcd: string;
  mockDriver: string;
}

/** What {@link ensureBinaries} did. */
export interface BuildReport {
  binaries: Binaries;
  /** True when anything was compiled; false when the cache was used as is. */
  built: boolean;
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
  /** Progress lines. */
  log: (line: string) => void;
}

const TOOLS_DIR = new URL("./tools/", import.meta.url).pathname;

/**
 * Linker flags that give the Kubernetes programs their real version (`/version`, `--version`,
 * `kubectl version`), as kubernetes hack/lib/version.sh sets them.
 */
function kubernetesLdflags(): string {
  const [major, minor] = KUBERNETES_VERSION.slice(1).split(".");
  return [
    `-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    "-X k8s.io/component-base/version.gitTreeState=clean",
  ].join(" ");
}

interface Target {
  name: keyof Binaries;
  file: string;
  pkg: string;
  ldflags: string;
}

const TARGETS: readonly Target[] = [
  { name: "mockDriver", file: "mockdriver", pkg: "./mockdriver", ldflags: "" },
  { name: "etcd", file: "etcd", pkg: "go.etcd.io/etcd/server/v3", ldflags: "" },
  {
    name: "kubeApiserver",
    file: "kube-apiserver",
    pkg: "k8s.io/kubernetes/cmd/kube-apiserver",
    ldflags: kubernetesLdflags(),
  },
  {
    name: "kubeControllerManager",
    file: "kube-controller-manager",
    pkg: "k8s.io/kubernetes/cmd/kube-controller-manager",
    ldflags: kubernetesLdflags(),
  },
  {
    name: "kubectl",
    file: "kubectl",
    pkg: "k8s.io/kubernetes/cmd/kubectl",
    ldflags: kubernetesLdflags(),
  },
];

async function stampOf(go: string, target: Target): Promise<string> {
  const parts = [
    await Deno.readTextFile(`${TOOLS_DIR}go.mod`),
    await Deno.readTextFile(`${TOOLS_DIR}go.sum`),
    target.name === "mockDriver" ? await Deno.readTextFile(`${TOOLS_DIR}mockdriver/main.go`) : "",
    (await runOk(go, ["version"])).trim(),
    target.pkg,
    target.ldflags,
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
 * Builds whatever is missing or stale, at low CPU priority (`nice -n 10`).
 *
 * @throws {Error} when `go` is missing or a build fails (the message carries Go's output).
 */
export async function ensureBinaries(options: EnsureBinariesOptions): Promise<BuildReport> {
  const started = performance.now();
  const bin = `${options.cacheDir}/bin`;
  await Deno.mkdir(bin, { recursive: true });
  const version = await run(options.go, ["version"]);
  if (!version.ok) {
    throw new Error(`cannot run "${options.go} version": ${version.stderr || version.error}`);
  }
  let built = false;
  const binaries: Partial<Binaries> = {};
  for (const target of TARGETS) {
    const out = `${bin}/${target.file}`;
    const stampFile = `${out}.stamp`;
    const stamp = await stampOf(options.go, target);
    binaries[target.name] = out;
    if (await exists(out) && (await readOr(stampFile, "")) === stamp) continue;
    options.log(`building ${target.file} (${target.pkg})`);
    const t0 = performance.now();
    const args = ["-n", "10", options.go, "build", "-p", String(options.jobs), "-trimpath"];
    if (target.ldflags !== "") args.push("-ldflags", target.ldflags);
    args.push("-o", out, target.pkg);
    const result = await run("nice", args, { cwd: TOOLS_DIR });
    if (!result.ok) {
      throw new Error(`go build ${target.pkg} failed:\n${result.stderr}${result.error}`);
    }
    await Deno.writeTextFile(stampFile, stamp);
    options.log(`built ${target.file} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    built = true;
  }
  return {
    binaries: binaries as Binaries,
    built,
    seconds: (performance.now() - started) / 1000,
  };
}
