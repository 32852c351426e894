/**
 * The attacher as one JavaScript file (`deno bundle`), for running the suite against what
 * releases ship instead of `main.ts`.
 *
 * @module
 */

import { run } from "./exec.ts";

const REPO = new URL("../../", import.meta.url).pathname;

/**
 * Bundles `main.ts` into `output` (as the `bundle` task does, with the lockfile frozen) and
 * returns the seconds it took.
 *
 * @throws {Error} with deno's output when bundling fails.
 */
export async function bundleAttacher(output: string): Promise<number> {
  const t0 = performance.now();
  const result = await run(Deno.execPath(), [
    "bundle",
    "--frozen",
    "--platform=deno",
    "--output",
    output,
    "main.ts",
  ], { cwd: REPO });
  if (!result.ok) throw new Error(`deno bundle failed:\n${result.stderr}${result.error}`);
  return (performance.now() - t0) / 1000;
}
