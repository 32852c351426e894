/**
 * The attacher as bundled JavaScript (`deno bundle`), for running the suite against what
 * releases ship instead of `main.ts`.
 *
 * @module
 */

import { run } from "./exec.ts";

const REPO = new URL("../../", import.meta.url).pathname;

/**
 * Bundles `main.ts` into the directory `outdir` (as the `bundle` task does, with the lockfile
 * frozen; the entry is `<outdir>/main.js`) and returns the seconds it took.
 *
 * @throws {Error} with deno's output when bundling fails.
 */
export async function bundleAttacher(outdir: string): Promise<number> {
  const t0 = performance.now();
  const result = await run(Deno.execPath(), [
    "bundle",
    "--frozen",
    "--platform=deno",
    "--code-splitting",
    "--outdir",
    outdir,
    "main.ts",
  ], { cwd: REPO });
  if (!result.ok) throw new Error(`deno bundle failed:\n${result.stderr}${result.error}`);
  return (performance.now() - t0) / 1000;
}
