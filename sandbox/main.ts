/**
 * `csi-attacher sandbox`: runs the real attacher against an in-memory API server and a CSI
 * driver (the built-in example driver, or a real driver's socket given with `--csi-address`),
 * creates a PersistentVolume, a CSINode and a VolumeAttachment, and prints a timeline of what
 * the attacher does through attach, detach and the PersistentVolume's release. No cluster is
 * needed; a driver author can exercise ControllerPublishVolume / ControllerUnpublishVolume.
 *
 * Flags follow Go `flag` syntax; flags after `--` go to the attacher itself.
 *
 * @module
 */

import { FlagError, FlagSet } from "../lib/cli/flags.ts";
import { runScenario, type ScenarioConfig } from "./scenario.ts";
import { defineFaultFlags, FAULTS_NEED_BUILT_IN } from "./fault_flags.ts";
import { defineVolumeFlags } from "./volume_flags.ts";

/** Where the sandbox writes. */
export interface SandboxIo {
  /** Receives one output line, without a trailing newline. */
  write(line: string): void;
}

/** The node ID the built-in example driver is given (and the CSINode names) by default. */
export const DEFAULT_SANDBOX_NODE_ID = "example-node-1";

/** The sandbox's flags, defined on a fresh FlagSet. */
function defineFlags() {
  const set = new FlagSet({ name: "csi-attacher sandbox" });
  return {
    set,
    csiAddress: set.string(
      "csi-address",
      "",
      "CSI endpoint of a real driver (socket path, unix:// URI or host:port). Empty: the built-in example driver on a socket in a temporary directory.",
    ),
    volumeHandle: set.string(
      "volume-handle",
      "vol-1",
      "Volume handle of the PersistentVolume (a real volume's ID with --csi-address).",
    ),
    nodeId: set.string(
      "node-id",
      DEFAULT_SANDBOX_NODE_ID,
      "The driver's node ID, written into the CSINode (a real node ID with --csi-address).",
    ),
    nodeName: set.string("node-name", "node-1", "Kubernetes node name of the VolumeAttachment."),
    accessMode: set.string(
      "access-mode",
      "ReadWriteOnce",
      "Access mode of the PersistentVolume: ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod.",
    ),
    fsType: set.string("fs-type", "", "spec.csi.fsType of the PersistentVolume."),
    readOnly: set.bool("read-only", false, "spec.csi.readOnly of the PersistentVolume."),
    ...defineVolumeFlags(
      set,
      "Create a Secret with these key=value,... pairs and make it the PersistentVolume's controllerPublishSecretRef.",
    ),
    waitTimeout: set.duration(
      "wait-timeout",
      30_000,
      "Upper bound of each wait: startup, attach, detach, release.",
    ),
    v: set.int("v", 0, "Also print the attacher's log lines up to this verbosity."),
    faults: defineFaultFlags(set),
  };
}

/** The usage text of `csi-attacher sandbox`. */
export const SANDBOX_USAGE: string = [
  "Usage: csi-attacher sandbox [flags] [-- attacher flags]",
  "       csi-attacher sandbox check [flags]   (checks a driver; see sandbox check -h)",
  "",
  "Runs the attacher against an in-memory API server and a CSI driver, attaches and detaches",
  "one volume and prints a timeline of the attacher's API requests and CSI calls.",
  "Exit status: 0 when attach, detach and release worked; 1 when any failed; 2 for bad flags.",
  "",
  "Examples:",
  "  csi-attacher sandbox",
  "  csi-attacher sandbox --csi-address=/run/csi/socket --volume-handle=vol-42 --node-id=worker-7",
  "  csi-attacher sandbox -- --leader-election --timeout=5s",
  "  csi-attacher sandbox --fail=publish:NotFound",
  "",
  defineFlags().set.printDefaults().trimEnd(),
].join("\n");

function writeUsage(io: SandboxIo): void {
  for (const line of SANDBOX_USAGE.split("\n")) io.write(line);
}

/**
 * Runs `csi-attacher sandbox` with `args` (the arguments after `sandbox`) and returns the exit
 * status: 0 when the volume was attached, detached and released, 1 when a step failed (the
 * driver's error as the attacher recorded it is printed), 2 for bad flags. Exits by itself
 * (each wait is bounded by `--wait-timeout`) and removes everything it created.
 */
export async function runSandbox(args: string[], io: SandboxIo): Promise<number> {
  if (args[0] === "check") {
    const { runCheck } = await import("./check_main.ts");
    return await runCheck(args.slice(1), io);
  }
  const flags = defineFlags();
  let rest: string[];
  try {
    const parsed = flags.set.parse(args);
    if (parsed.helpRequested) {
      writeUsage(io);
      return 0;
    }
    rest = parsed.args;
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    io.write(err.message);
    writeUsage(io);
    return 2;
  }
  // FlagSet stops at `--` and drops it; anything else left over is a stray argument.
  const dashIndex = args.indexOf("--");
  const attacherArgs = dashIndex >= 0 && args.length - dashIndex - 1 === rest.length ? rest : [];
  if (attacherArgs.length !== rest.length) {
    io.write(`unexpected argument ${JSON.stringify(rest[0])}; attacher flags go after --`);
    writeUsage(io);
    return 2;
  }
  const external = flags.csiAddress.value !== "";
  if (external && (!flags.volumeHandle.isSet || !flags.nodeId.isSet)) {
    io.write("with --csi-address, --volume-handle and --node-id must name a real volume and node");
    return 2;
  }
  if (external && flags.faults.any) {
    io.write(FAULTS_NEED_BUILT_IN);
    return 2;
  }
  if (flags.volumeHandle.value === "" || flags.nodeId.value === "" || flags.nodeName.value === "") {
    io.write("--volume-handle, --node-id and --node-name must not be empty");
    return 2;
  }
  const config: ScenarioConfig = {
    csiAddress: external ? flags.csiAddress.value : undefined,
    volumeHandle: flags.volumeHandle.value,
    nodeId: flags.nodeId.value,
    nodeName: flags.nodeName.value,
    accessMode: flags.accessMode.value,
    fsType: flags.fsType.value,
    readOnly: flags.readOnly.value,
    volumeAttributes: flags.volumeAttributes.value,
    secret: flags.secret.value,
    waitTimeoutMs: flags.waitTimeout.value,
    attacherArgs,
    verbosity: flags.v.isSet ? flags.v.value : undefined,
    driverOptions: flags.faults.driverOptions(),
  };
  const report = await runScenario(config, io);
  return report.exitCode;
}
