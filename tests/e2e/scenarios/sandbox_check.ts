/**
 * Scenario 23: `csi-attacher sandbox check` against the Kubernetes CSI mock driver, run as a
 * driver author runs it (`deno run main.ts sandbox check --csi-address=...`): every check that
 * applies passes, the JUnit file has one test case per check, and the driver publishes nothing
 * afterwards. A second run names a second node, which the mock driver (one node only) answers
 * NotFound instead of FailedPrecondition: that check fails, with the text the attacher writes.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { CHECK_IDS } from "../../../sandbox/checks.ts";
import { findAll, parseXml } from "../../../testkit/xml_reader.ts";

const MAIN = new URL("../../../main.ts", import.meta.url).pathname;

interface CheckJson {
  id: string;
  status: string;
  message: string;
  attacherText?: string;
}

/** Runs the check as a process; its exit status, JSON report and JUnit file. */
async function runCheck(ctx: ScenarioContext, volumeId: string, extra: string[]) {
  const dir = await Deno.makeTempDir({ prefix: "csi-attacher-e2e-check-" });
  try {
    const junitPath = `${dir}/check.xml`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        MAIN,
        "sandbox",
        "check",
        `--csi-address=${ctx.cluster.info.driverSocket}`,
        `--volume-handle=${volumeId}`,
        `--node-id=${ctx.nodeId}`,
        "--output=json",
        `--junit=${junitPath}`,
        ...extra,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    const stderr = new TextDecoder().decode(out.stderr);
    let report: { checks: CheckJson[]; exitCode: number };
    try {
      report = JSON.parse(stdout);
    } catch (err) {
      throw new Error(`sandbox check printed no JSON (status ${out.code}):\n${stdout}${stderr}`, {
        cause: err,
      });
    }
    const junit = parseXml(await Deno.readTextFile(junitPath));
    for (const c of report.checks) console.log(`    ${c.status.padEnd(7)} ${c.id}: ${c.message}`);
    return { code: out.code, report, junit };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** See the module documentation. */
export async function sandboxCheck(ctx: ScenarioContext): Promise<void> {
  const volumeId = await ctx.cluster.driver().createVolume("s22-sandbox-check");

  const first = await runCheck(ctx, volumeId, []);
  const notPassed = first.report.checks.filter((c) => c.status !== "passed")
    .map((c) => `${c.id}: ${c.status}: ${c.message}`);
  assert.deepEqual(notPassed, ["second-node: skipped: no --second-node-id"]);
  assert.equal(first.code, 0);
  assert.equal(first.report.exitCode, 0);
  const cases = findAll(first.junit, "testcase");
  assert.deepEqual(cases.map((c) => c.attributes.name), [...CHECK_IDS]);
  assert.equal(findAll(first.junit, "failure").length, 0);
  assert.deepEqual(
    findAll(first.junit, "skipped").map((s) => s.attributes.message),
    ["no --second-node-id"],
  );
  assert.ok(
    !(await ctx.kit.publishedVolumes(ctx.nodeId)).has(volumeId),
    "the check leaves the volume unpublished",
  );

  const second = await runCheck(ctx, volumeId, ["--second-node-id=e2e-other-node"]);
  assert.equal(second.code, 1);
  const failed = second.report.checks.filter((c) => c.status === "failed");
  assert.deepEqual(failed.map((c) => c.id), ["second-node"]);
  assert.match(failed[0]!.attacherText ?? "", /^rpc error: code = NotFound desc = /);
  assert.match(failed[0]!.message, /^expected FailedPrecondition; status\.attachError: /);
  assert.ok(!(await ctx.kit.publishedVolumes(ctx.nodeId)).has(volumeId));
}
