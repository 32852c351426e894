/** The attacher's version, printed by `--version` and sent in the User-Agent. */
export const VERSION = "v0.1.0";
