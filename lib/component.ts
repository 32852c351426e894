/**
 * The attacher's component name, as the Go sidecar names itself (`cmd/csi-attacher`): the
 * program in the usage text and `--version`, the User-Agent, the `source.component` of its
 * Events, the z-pages' header, the controller's log name and the prefix of its queues' names.
 *
 * @module
 */

/** `csi-attacher`. */
export const COMPONENT_NAME = "csi-attacher";
