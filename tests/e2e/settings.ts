/**
 * Settings of the end-to-end suite and of `deno task cluster`, from the environment the entry
 * points pass in.
 *
 * @module
 */

import {
  type BuildReport,
  ensureBinaries,
  type KubernetesRelease,
  kubernetesRelease,
} from "./binaries.ts";
import { REPUBLISH_CAUSES, type RepublishCause } from "./publish_analysis.ts";

/** Resolved settings. */
export interface E2eSettings {
  /** The Kubernetes release to build and run (`E2E_KUBERNETES`, default the newest supported). */
  kubernetes: KubernetesRelease;
  /** Where built programs are cached. */
  cacheDir: string;
  /** The `go` command. */
  go: string;
  /** `go build -p`. */
  goJobs: number;
  /** Scenario numbers to run; undefined = all. */
  only: Set<number> | undefined;
  /** Keep the working directory even when everything passed. */
  keep: boolean;
  /** Program the attachers run instead of `main.ts` (e.g. a bundle). */
  attacherEntry: string | undefined;
  /** Causes of repeated publishes reported as warnings, not failures (`E2E_TOLERATE`). */
  tolerate: Set<RepublishCause>;
  /** The RBAC manifest the attacher's user is bound by. */
  rbacManifest: { path: string; text: string };
}

/** The shipped manifest: the attacher's user gets exactly these rights. */
export const DEPLOY_RBAC = new URL("../../deploy/kubernetes/rbac.yaml", import.meta.url).pathname;

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

async function findGo(env: (name: string) => string | undefined): Promise<string> {
  const explicit = env("GO");
  if (explicit) return explicit;
  for (const dir of (env("PATH") ?? "").split(":")) {
    if (dir !== "" && await isFile(`${dir}/go`)) return `${dir}/go`;
  }
  return "/usr/local/go/bin/go";
}

/**
 * Reads `E2E_KUBERNETES`, `E2E_CACHE_DIR`, `GO`, `E2E_GO_JOBS`, `E2E_ONLY`, `E2E_KEEP`,
 * `E2E_ATTACHER_ENTRY`, `E2E_TOLERATE` (plus `HOME` and `PATH`) through `env`, and reads the RBAC
 * manifest.
 *
 * @throws {RangeError} for an unreadable `E2E_GO_JOBS` or `E2E_ONLY`, or an unsupported
 * `E2E_KUBERNETES`.
 */
export async function resolveSettings(
  env: (name: string) => string | undefined,
): Promise<E2eSettings> {
  const jobs = Number(env("E2E_GO_JOBS") ?? "2");
  if (!Number.isInteger(jobs) || jobs < 1) {
    throw new RangeError("E2E_GO_JOBS must be a positive integer");
  }
  let only: Set<number> | undefined;
  const onlyText = env("E2E_ONLY");
  if (onlyText) {
    only = new Set(onlyText.split(",").map((s) => Number(s.trim())));
    if ([...only].some((n) => !Number.isInteger(n))) {
      throw new RangeError(`E2E_ONLY must list scenario numbers, got "${onlyText}"`);
    }
  }
  const tolerate = new Set<RepublishCause>();
  for (const cause of (env("E2E_TOLERATE") ?? "").split(",").map((c) => c.trim())) {
    if (cause === "") continue;
    if (!REPUBLISH_CAUSES.includes(cause as RepublishCause)) {
      throw new RangeError(
        `E2E_TOLERATE: unknown cause "${cause}" (${REPUBLISH_CAUSES.join(", ")})`,
      );
    }
    tolerate.add(cause as RepublishCause);
  }
  return {
    kubernetes: kubernetesRelease(env("E2E_KUBERNETES")),
    tolerate,
    cacheDir: env("E2E_CACHE_DIR") ?? `${env("HOME") ?? "/tmp"}/.cache/csi-attacher-e2e`,
    go: await findGo(env),
    goJobs: jobs,
    only,
    keep: env("E2E_KEEP") === "1",
    attacherEntry: env("E2E_ATTACHER_ENTRY") || undefined,
    rbacManifest: { path: DEPLOY_RBAC, text: await Deno.readTextFile(DEPLOY_RBAC) },
  };
}

/**
 * The cluster's programs for `settings` (its release, cache directory, `go` and jobs), built when
 * missing; kubectl too when `kubectl` is set.
 */
export function ensureSettingsBinaries(
  settings: E2eSettings,
  log: (line: string) => void,
  kubectl = false,
): Promise<BuildReport> {
  return ensureBinaries({
    cacheDir: settings.cacheDir,
    go: settings.go,
    jobs: settings.goJobs,
    release: settings.kubernetes,
    kubectl,
    log,
  });
}
