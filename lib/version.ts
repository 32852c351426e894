/**
 * The attacher's version, printed by `--version`, logged at start, shown by `/statusz` and sent
 * in the User-Agent.
 *
 * Stamped at build from the repository, as the Go sidecars' release tooling stamps theirs
 * (kubernetes-csi/csi-release-tools `build.make`: `git describe --long --tags --match='v*'
 * --dirty`): `deploy/build/stamp_version.ts` replaces {@link VERSION_PLACEHOLDER} in the bundle
 * that `deno task bundle` and `deno task compile` write, so the executable carries it too. Run
 * from source (`deno run main.ts`), nothing replaced it, and the version is
 * `<BASE_VERSION>-dev`.
 *
 * @module
 */

/** The release this source is, or leads to. */
export const BASE_VERSION = "v0.1.0";

/**
 * The string literal the build replaces with the stamped version. The check below names only its
 * first part, so that the replacement leaves the check intact.
 */
export const VERSION_PLACEHOLDER = "@@csi-attacher-build-version@@";

const stamped: string = "@@csi-attacher-build-version@@";

/** The version: stamped at build, else {@link BASE_VERSION} with `-dev`. */
export const VERSION: string = stamped.startsWith("@@csi-attacher-build")
  ? `${BASE_VERSION}-dev`
  : stamped;
