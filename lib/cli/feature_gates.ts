/**
 * The attacher's feature gates, as the Go attacher keeps them in `pkg/features` (and
 * component-base's `featuregate` resolves them): the known gates with their stage and default,
 * and the effective values after `--feature-gates`.
 *
 * @module
 */

/** The attacher's feature gates, resolved to their effective values. */
export interface FeatureGates {
  /**
   * On SIGTERM/SIGINT stop the controllers, let work in flight finish, then release the lease so
   * a standby takes over at once. Alpha and off by default in the Go attacher; on by default here
   * (a deliberate difference, see README "Deliberate differences"); `ReleaseLeaderElectionOnExit=false` turns it off.
   */
  readonly ReleaseLeaderElectionOnExit: boolean;
  /** GA, default true: write `status.attachError.errorCode` (the gRPC code) on attach errors. */
  readonly MutableCSINodeAllocatableCount: boolean;
  /**
   * Beyond the Go attacher, beta and on by default: with `--leader-election` a standby lists and
   * watches from its start, so that at its Lease acquisition its caches are already synced
   * (README "Deliberate differences"); `WarmStandby=false` lists only in the term, as Go does.
   */
  readonly WarmStandby: boolean;
}

/** A feature gate's maturity, as component-base prints it. */
export type FeatureStage = "ALPHA" | "BETA" | "GA";

/** The feature gates this attacher knows, with their stage and default. */
export const KNOWN_FEATURE_GATES: ReadonlyArray<
  { readonly name: keyof FeatureGates; readonly stage: FeatureStage; readonly default: boolean }
> = Object.freeze([
  Object.freeze({ name: "MutableCSINodeAllocatableCount", stage: "GA", default: true } as const),
  Object.freeze({ name: "ReleaseLeaderElectionOnExit", stage: "ALPHA", default: true } as const),
  Object.freeze({ name: "WarmStandby", stage: "BETA", default: true } as const),
]);

/**
 * Resolves the `--feature-gates` map against {@link KNOWN_FEATURE_GATES}, like component-base's
 * `SetFromMap`: `AllAlpha`/`AllBeta` set every alpha/beta gate not named explicitly.
 *
 * @throws {Error} `unrecognized feature gate: <name>` for a name this attacher does not know
 */
export function resolveFeatureGates(requested: Readonly<Record<string, boolean>>): FeatureGates {
  const known = new Map(KNOWN_FEATURE_GATES.map((g) => [g.name as string, g]));
  for (const name of Object.keys(requested)) {
    if (name !== "AllAlpha" && name !== "AllBeta" && !known.has(name)) {
      throw new Error(`unrecognized feature gate: ${name}`);
    }
  }
  const effective = (name: keyof FeatureGates): boolean => {
    const gate = known.get(name)!;
    const explicit = requested[name];
    if (explicit !== undefined) return explicit;
    if (gate.stage === "ALPHA" && requested.AllAlpha !== undefined) return requested.AllAlpha;
    if (gate.stage === "BETA" && requested.AllBeta !== undefined) return requested.AllBeta;
    return gate.default;
  };
  return {
    ReleaseLeaderElectionOnExit: effective("ReleaseLeaderElectionOnExit"),
    MutableCSINodeAllocatableCount: effective("MutableCSINodeAllocatableCount"),
    WarmStandby: effective("WarmStandby"),
  };
}

/** The description of `--feature-gates`, listing the gates like component-base does. */
export function featureGatesUsage(): string {
  const lines = [
    "AllAlpha=true|false (ALPHA - default=false)",
    "AllBeta=true|false (BETA - default=false)",
    ...KNOWN_FEATURE_GATES.map((g) => `${g.name}=true|false (${g.stage} - default=${g.default})`),
  ].sort();
  return "A set of key=value pairs that describe feature gates for alpha/experimental features. " +
    `Options are:\n${lines.join("\n")}`;
}
