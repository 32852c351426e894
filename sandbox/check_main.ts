/**
 * `csi-attacher sandbox check`: runs the checks of `checks.ts` against a driver (a real
 * driver's socket with `--csi-address`, else the built-in example driver, which can be given
 * faults to practise against) and prints a timeline per check and its verdict; `--output=json`
 * prints one JSON document instead, `--junit=FILE` writes a JUnit XML file as well.
 *
 * Exit status: 0 when every check that applies passed, 1 when one failed, 2 for bad flags.
 *
 * @module
 */

import { errorText } from "../lib/errors.ts";
import { FlagError, FlagSet } from "../lib/cli/flags.ts";
import { ExampleDriver } from "../testkit/csi/example_driver.ts";
import type { CsiDriverServer } from "../testkit/csi/server.ts";
import { CheckRig } from "./check_rig.ts";
import { defineFaultFlags, FAULTS_NEED_BUILT_IN } from "./fault_flags.ts";
import { defineVolumeFlags, parseList } from "./volume_flags.ts";
import {
  type CheckRecord,
  type CheckReport,
  exitCodeOf,
  reportJson,
  reportJunit,
  summarize,
} from "./check_report.ts";
import { allChecks, CHECK_IDS, type CheckConfig, newCheckState } from "./checks.ts";

/** Where the check writes. */
export interface CheckIo {
  /** Receives one output line, without a trailing newline. */
  write(line: string): void;
}

/** Node IDs the built-in example driver knows by default. */
export const CHECK_DEFAULT_NODE_ID = "example-node-1";
export const CHECK_DEFAULT_SECOND_NODE_ID = "example-node-2";

/** Checks that cannot be skipped: every other one needs them. */
const STARTUP_CHECKS = new Set(["probe", "plugin-info", "capabilities"]);

function defineFlags() {
  const set = new FlagSet({ name: "csi-attacher sandbox check" });
  return {
    set,
    csiAddress: set.string(
      "csi-address",
      "",
      "CSI endpoint of the driver to check (socket path, unix:// URI or host:port). Empty: the built-in example driver.",
    ),
    volumeHandle: set.string(
      "volume-handle",
      "vol-1",
      "ID of an existing volume the checks publish and unpublish (required with --csi-address).",
    ),
    nodeId: set.string(
      "node-id",
      CHECK_DEFAULT_NODE_ID,
      "The driver's ID of a node to publish to (required with --csi-address).",
    ),
    secondNodeId: set.string(
      "second-node-id",
      "",
      "The driver's ID of another node, for the second-node check; empty: that check is skipped (built-in driver: " +
        CHECK_DEFAULT_SECOND_NODE_ID + ").",
    ),
    accessMode: set.string(
      "access-mode",
      "ReadWriteOnce",
      "Access mode of the PersistentVolumes: ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod.",
    ),
    fsType: set.string("fs-type", "", "spec.csi.fsType of the PersistentVolumes."),
    mountOptions: set.custom<string[]>(
      "mount-options",
      ["noatime"],
      "spec.mountOptions of the mount-options check, comma-separated.",
      { parse: parseList, typeName: "list", defaultText: "noatime" },
    ),
    ...defineVolumeFlags(
      set,
      "The controllerPublishSecretRef Secret of the secrets check, key=value,...; default: one random value.",
    ),
    timeout: set.duration(
      "timeout",
      15_000,
      "Timeout of each ControllerPublish/Unpublish and ListVolumes call, as the attacher's --timeout.",
    ),
    waitTimeout: set.duration(
      "wait-timeout",
      30_000,
      "Upper bound of the connection and of the wait until Probe says ready.",
    ),
    output: set.string("output", "text", "text: a timeline per check; json: one JSON document."),
    junit: set.string("junit", "", "Also write a JUnit XML file here, one test case per check."),
    skip: set.custom<string[]>(
      "skip",
      [],
      `Checks not to run, comma-separated: ${
        CHECK_IDS.filter((id) => !STARTUP_CHECKS.has(id)).join(", ")
      }.`,
      { parse: (text, current) => [...current, ...parseList(text)], typeName: "list" },
    ),
    faults: defineFaultFlags(set),
  };
}

/** The usage text of `csi-attacher sandbox check`. */
export const CHECK_USAGE: string = [
  "Usage: csi-attacher sandbox check [flags]",
  "",
  "Checks a CSI driver the way the attacher will use it: its startup calls and capabilities,",
  "publish and unpublish and their repetitions, a second node, ListVolumes, read-only, block,",
  "mount options, secrets and a call cut off by its deadline. Each check runs the attacher's own",
  "code and reports what it would write into status.attachError/detachError or log.",
  "Exit status: 0 when every check that applies passed; 1 when one failed; 2 for bad flags.",
  "",
  "Examples:",
  "  csi-attacher sandbox check",
  "  csi-attacher sandbox check --fail=publish:NotFound",
  "  csi-attacher sandbox check --csi-address=/run/csi/socket --volume-handle=vol-42 \\",
  "      --node-id=worker-7 --second-node-id=worker-8 --junit=check.xml",
  "",
  defineFlags().set.printDefaults().trimEnd(),
].join("\n");

function usageError(io: CheckIo, message: string): number {
  io.write(message);
  for (const line of CHECK_USAGE.split("\n")) io.write(line);
  return 2;
}

function randomSecret(): Record<string, string> {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return {
    "sandbox-check-key": Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(""),
  };
}

const MARK: Record<CheckRecord["status"], string> = {
  passed: "PASSED ",
  failed: "FAILED ",
  skipped: "SKIPPED",
};

/**
 * Runs `csi-attacher sandbox check` with `args` (the arguments after `check`) and returns the
 * exit status. Exits by itself (every call has a timeout) and removes what it created.
 */
export async function runCheck(args: string[], io: CheckIo): Promise<number> {
  const flags = defineFlags();
  try {
    const parsed = flags.set.parse(args);
    if (parsed.helpRequested) {
      for (const line of CHECK_USAGE.split("\n")) io.write(line);
      return 0;
    }
    if (parsed.args.length > 0) {
      return usageError(io, `unexpected argument ${JSON.stringify(parsed.args[0])}`);
    }
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    return usageError(io, err.message);
  }
  const external = flags.csiAddress.value !== "";
  if (external && (!flags.volumeHandle.isSet || !flags.nodeId.isSet)) {
    return usageError(
      io,
      "with --csi-address, --volume-handle and --node-id must name a real volume and node",
    );
  }
  if (external && flags.faults.any) return usageError(io, FAULTS_NEED_BUILT_IN);
  if (flags.volumeHandle.value === "" || flags.nodeId.value === "") {
    return usageError(io, "--volume-handle and --node-id must not be empty");
  }
  if (flags.output.value !== "text" && flags.output.value !== "json") {
    return usageError(
      io,
      `--output must be text or json, not ${JSON.stringify(flags.output.value)}`,
    );
  }
  for (const id of flags.skip.value) {
    if (!CHECK_IDS.includes(id) || STARTUP_CHECKS.has(id)) {
      return usageError(io, `--skip: no such check to skip: ${JSON.stringify(id)}`);
    }
  }
  const secondNodeId = flags.secondNodeId.isSet || external
    ? flags.secondNodeId.value
    : CHECK_DEFAULT_SECOND_NODE_ID;
  const config: CheckConfig = {
    volumeHandle: flags.volumeHandle.value,
    nodeId: flags.nodeId.value,
    secondNodeId,
    accessMode: flags.accessMode.value,
    fsType: flags.fsType.value,
    mountOptions: flags.mountOptions.value,
    volumeAttributes: flags.volumeAttributes.value,
    secret: flags.secret.value ?? randomSecret(),
    timeoutMs: flags.timeout.value,
    skip: new Set(flags.skip.value),
  };
  const json = flags.output.value === "json";

  let dir: string | undefined;
  let driverServer: CsiDriverServer | undefined;
  let rig: CheckRig | undefined;
  try {
    let address = flags.csiAddress.value;
    if (!external) {
      dir = await Deno.makeTempDir({ prefix: "csi-attacher-sandbox-check-" });
      const nodeIds = [config.nodeId, ...(secondNodeId === "" ? [] : [secondNodeId])];
      const driver = new ExampleDriver({}, { nodeIds, ...flags.faults.driverOptions() });
      driver.createVolume(config.volumeHandle);
      driverServer = await driver.start(`${dir}/csi.sock`);
      address = driverServer.address;
    }
    const shownAddress = external ? address : "the built-in example driver";
    const output: string[] = [];
    const say = (line: string) => {
      output.push(line);
      if (!json) io.write(line);
    };
    let timeline: string[] = [];
    rig = await CheckRig.start({
      address,
      timeoutMs: config.timeoutMs,
      waitTimeoutMs: flags.waitTimeout.value,
      onLine: (line) => {
        timeline.push(line);
        say(`  ${line}`);
      },
    });
    say(
      `csi-attacher sandbox check: ${shownAddress}, volume ${config.volumeHandle}, node ${config.nodeId}`,
    );
    const state = newCheckState();
    const checks = allChecks(output);
    const records: CheckRecord[] = [];
    for (const [index, check] of checks.entries()) {
      say("");
      say(`[${index + 1}/${checks.length}] ${check.id}: ${check.title}`);
      timeline = [];
      const startedAt = performance.now();
      let outcome;
      if (config.skip.has(check.id)) {
        outcome = { status: "skipped" as const, message: "skipped with --skip" };
      } else {
        try {
          outcome = await check.run(rig, config, state);
        } catch (err) {
          outcome = { status: "failed" as const, message: `the check failed: ${errorText(err)}` };
        }
      }
      const record: CheckRecord = {
        id: check.id,
        title: check.title,
        status: outcome.status,
        message: outcome.message,
        ...(outcome.attacherText === undefined ? {} : { attacherText: outcome.attacherText }),
        durationMs: performance.now() - startedAt,
        timeline,
      };
      records.push(record);
      say(`  ${MARK[record.status]} ${record.message}`);
    }
    const report: CheckReport = {
      driverAddress: shownAddress,
      driverName: rig.driverName,
      checks: records,
    };
    const counts = summarize(report);
    const failedIds = records.filter((r) => r.status === "failed").map((r) => r.id);
    say("");
    say(`Checks: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
    say(failedIds.length === 0 ? "Outcome: OK" : `Outcome: FAILED (${failedIds.join(", ")})`);
    if (flags.junit.value !== "") {
      await Deno.writeTextFile(flags.junit.value, reportJunit(report));
    }
    if (json) io.write(reportJson(report));
    return exitCodeOf(report);
  } finally {
    await rig?.close();
    await driverServer?.close();
    if (dir !== undefined) await Deno.remove(dir, { recursive: true });
  }
}
