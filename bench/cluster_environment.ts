/**
 * The benchmark environment on the e2e cluster (placeholder until the cluster task exists).
 *
 * @module
 */

import type { EnvironmentFactory } from "./environment.ts";

/** Opens the e2e cluster, or resolves undefined when it is not available. */
export function openClusterEnvironment(
  _options: { repo: string; log: (line: string) => void },
): Promise<{ factory: EnvironmentFactory; description: string } | undefined> {
  return Promise.resolve(undefined);
}
