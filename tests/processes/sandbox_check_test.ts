/**
 * `csi-attacher sandbox check` in-process: every check passes against the built-in example
 * driver, and each of the driver's fault modes makes the matching check fail with the text the
 * attacher records; the JSON document and the JUnit file (read back with an XML reader) say
 * the same.
 */

import assert from "node:assert/strict";
import { runSandbox } from "../../sandbox/main.ts";
import { CHECK_USAGE } from "../../sandbox/check_main.ts";
import { CHECK_IDS } from "../../sandbox/checks.ts";
import { findAll, parseXml, type XmlElement } from "../../testkit/xml_reader.ts";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { FakeCsiDriver } from "../../testkit/csi/fake_driver.ts";

interface JsonCheck {
  id: string;
  status: "passed" | "failed" | "skipped";
  message: string;
  attacherText?: string;
  timeline: string[];
}

interface JsonReport {
  driver: { address: string; name: string };
  summary: { passed: number; failed: number; skipped: number };
  exitCode: number;
  checks: JsonCheck[];
}

/** Runs `sandbox check` with `args`; returns the exit status and the lines written. */
async function check(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runSandbox(["check", ...args], { write: (line) => lines.push(line) });
  return { code, lines };
}

/** Runs it with `--output=json --junit=<tmp>`; returns the status, the JSON and the JUnit root. */
async function checkJson(
  args: string[],
): Promise<{ code: number; report: JsonReport; junit: XmlElement }> {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-check-test-" });
  try {
    const { code, lines } = await check(["--output=json", `--junit=${dir}/check.xml`, ...args]);
    assert.equal(lines.length, 1, "one JSON document and nothing else");
    const report = JSON.parse(lines[0]!) as JsonReport;
    const junit = parseXml(await Deno.readTextFile(`${dir}/check.xml`));
    return { code, report, junit };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function byId(report: JsonReport, id: string): JsonCheck {
  const found = report.checks.find((c) => c.id === id);
  assert.ok(found, `no check ${id}`);
  return found;
}

function testcase(junit: XmlElement, id: string): XmlElement {
  const found = findAll(junit, "testcase").find((t) => t.attributes.name === id);
  assert.ok(found, `no testcase ${id}`);
  return found;
}

/** The checks that did not pass, as `id: status`. */
function notPassed(report: JsonReport): string[] {
  return report.checks.filter((c) => c.status !== "passed").map((c) => `${c.id}: ${c.status}`);
}

Deno.test("sandbox check against the built-in driver: every check passes, exit 0", async () => {
  const { code, lines } = await check([]);
  const out = lines.join("\n");
  assert.equal(code, 0, out);
  for (const [index, id] of CHECK_IDS.entries()) {
    assert.match(out, new RegExp(`^\\[${index + 1}/${CHECK_IDS.length}\\] ${id}: `, "m"));
  }
  assert.doesNotMatch(out, /^ {2}(FAILED|SKIPPED)/m);
  assert.match(out, new RegExp(`^Checks: ${CHECK_IDS.length} passed, 0 failed, 0 skipped$`, "m"));
  assert.equal(lines.at(-1), "Outcome: OK");
  // The timeline shows the attacher's calls, ListVolumes included, and what it wrote.
  assert.match(out, /CSI +ListVolumes\(maxEntries=1\) → OK entries=/);
  assert.match(
    out,
    /CSI +ControllerPublishVolume\(volumeId=vol-1, nodeId=example-node-1, capability=block SINGLE_NODE_WRITER, readonly=false\) → OK/,
  );
  assert.match(out, /capability=mount\(mountFlags=\["noatime"\]\) SINGLE_NODE_WRITER/);
  assert.match(out, /readonly=true\) → OK/);
  assert.match(out, /secrets=\*\*\*stripped\*\*\*\) → OK/);
  assert.match(
    out,
    /PASSED +refused; status\.attachError: rpc error: code = FailedPrecondition desc = volume vol-1 is published to node example-node-1 in a single-node mode$/m,
  );
  // Whether a 1 ms deadline cuts a call to a driver in this process depends on timing.
  assert.match(
    out,
    /PASSED +first call (cut off: the attacher wrote status\.attachError "rpc error: code = DeadlineExceeded desc = context deadline exceeded" and retries|answered within 1ms \(not cut off; the retry is made all the same\)); the retry attached/,
  );
  assert.doesNotMatch(out, /\/tmp\/|csi-attacher-sandbox-check-/, "no temporary paths");
});

Deno.test("sandbox check --output=json and --junit: one test case per check, all passed", async () => {
  const { code, report, junit } = await checkJson([]);
  assert.equal(code, 0);
  assert.equal(report.exitCode, 0);
  assert.equal(report.driver.name, "example.csi.k8s.io");
  assert.deepEqual(report.checks.map((c) => c.id), [...CHECK_IDS]);
  assert.deepEqual(report.summary, { passed: CHECK_IDS.length, failed: 0, skipped: 0 });
  assert.ok(byId(report, "publish").timeline.some((l) => /ControllerPublishVolume\(/.test(l)));

  assert.equal(junit.name, "testsuites");
  const [suite] = findAll(junit, "testsuite");
  assert.equal(suite?.attributes.tests, String(CHECK_IDS.length));
  assert.equal(suite?.attributes.failures, "0");
  assert.equal(suite?.attributes.skipped, "0");
  const cases = findAll(junit, "testcase");
  assert.deepEqual(cases.map((c) => c.attributes.name), [...CHECK_IDS]);
  for (const c of cases) {
    assert.deepEqual(c.children.map((child) => child.name), ["system-out"]);
    assert.ok(Number(c.attributes.time) >= 0);
  }
  assert.match(
    findAll(testcase(junit, "publish"), "system-out")[0]!.text,
    /CSI +ControllerPublishVolume\(volumeId=vol-1.*→ OK publishContext=\{"devicePath":"\/dev\/example\/vol-1"\}/,
  );
});

Deno.test("sandbox check --fail=publish:NotFound: the publish checks fail with attachError's text", async () => {
  const { code, report, junit } = await checkJson(["--fail=publish:NotFound"]);
  assert.equal(code, 1);
  assert.equal(report.exitCode, 1);
  const text = "rpc error: code = NotFound desc = fault injected with --fail=publish:NotFound";
  const publish = byId(report, "publish");
  assert.equal(publish.status, "failed");
  assert.equal(publish.attacherText, text);
  assert.match(publish.message, /^status\.attachError \(the attacher writes it and retries/);
  assert.ok(
    publish.timeline.some((l) => l.includes(`patch volumeattachments/va-1/status`)),
    "the error was written to the VolumeAttachment",
  );
  for (const id of ["read-only", "block", "mount-options", "secrets", "timeout"]) {
    assert.equal(byId(report, id).status, "failed", id);
    assert.equal(byId(report, id).attacherText, text, id);
  }
  for (const id of ["publish-again", "list-volumes", "list-volumes-paging", "second-node"]) {
    assert.equal(byId(report, id).status, "skipped", id);
    assert.equal(byId(report, id).message, "needs a published volume (see publish)");
  }
  // The detach after a failed attach still works: unpublish answers OK.
  assert.equal(byId(report, "unpublish").status, "passed");

  const failure = findAll(testcase(junit, "publish"), "failure")[0];
  assert.ok(failure);
  assert.equal(failure.text, text);
  assert.equal(failure.attributes.type, "attacher");
  assert.equal(failure.attributes.message, publish.message);
  const skipped = findAll(testcase(junit, "second-node"), "skipped")[0];
  assert.equal(skipped?.attributes.message, "needs a published volume (see publish)");
  const [suite] = findAll(junit, "testsuite");
  assert.equal(suite?.attributes.failures, String(report.summary.failed));
  assert.equal(suite?.attributes.skipped, String(report.summary.skipped));
});

Deno.test("sandbox check --non-idempotent: the repeated calls fail with the driver's codes", async () => {
  const { code, report } = await checkJson(["--non-idempotent"]);
  assert.equal(code, 1);
  assert.deepEqual(notPassed(report), [
    "unpublish-never-published: failed",
    "publish-again: failed",
    "second-node: failed",
    "unpublish-again: failed",
    "timeout: failed",
  ]);
  assert.equal(
    byId(report, "publish-again").attacherText,
    "rpc error: code = AlreadyExists desc = volume vol-1 is already published to node example-node-1",
  );
  assert.equal(
    byId(report, "unpublish-never-published").attacherText,
    "rpc error: code = NotFound desc = volume vol-1 is not published to node example-node-1",
  );
  assert.equal(
    byId(report, "unpublish-again").attacherText,
    "rpc error: code = NotFound desc = volume vol-1 is not published to node example-node-1",
  );
  // Its retry repeats a publish that the driver had done (whether the 1 ms deadline cut the
  // first call off or not).
  assert.equal(
    byId(report, "timeout").attacherText,
    "rpc error: code = AlreadyExists desc = volume vol-1 is already published to node example-node-1",
  );
  // Refused as it should be, but its detach is an unpublish of what is not published.
  assert.equal(
    byId(report, "second-node").attacherText,
    "rpc error: code = NotFound desc = volume vol-1 is not published to node example-node-2",
  );
});

Deno.test("sandbox check --slow=publish:1500ms --timeout=1s: DeadlineExceeded as the attacher writes it", async () => {
  const { code, report } = await checkJson(["--slow=publish:1500ms", "--timeout=1s"]);
  assert.equal(code, 1);
  const text = "rpc error: code = DeadlineExceeded desc = context deadline exceeded";
  assert.equal(byId(report, "publish").attacherText, text);
  const timeout = byId(report, "timeout");
  assert.equal(timeout.status, "failed");
  assert.equal(timeout.attacherText, text);
  assert.match(timeout.message, /^first call cut off: .*; the retry must succeed/);
});

Deno.test("sandbox check with unpublish, ListVolumes and access-mode faults", async () => {
  const unpublish = await checkJson(["--fail=unpublish:Internal"]);
  assert.equal(unpublish.code, 1);
  assert.equal(
    byId(unpublish.report, "unpublish").attacherText,
    "rpc error: code = Internal desc = fault injected with --fail=unpublish:Internal",
  );
  assert.match(byId(unpublish.report, "unpublish").message, /^status\.detachError /);

  const list = await checkJson(["--fail=list-volumes:Unavailable"]);
  assert.equal(list.code, 1);
  assert.deepEqual(notPassed(list.report), [
    "list-volumes: failed",
    "list-volumes-paging: failed",
  ]);
  assert.equal(
    byId(list.report, "list-volumes").attacherText,
    "failed to ListVolumes: failed to list volumes: rpc error: code = Unavailable desc = " +
      "fault injected with --fail=list-volumes:Unavailable",
  );

  const hidden = await checkJson(["--hide-published"]);
  assert.deepEqual(notPassed(hidden.report), [
    "list-volumes: failed",
    "list-volumes-paging: failed",
  ]);
  assert.equal(
    byId(hidden.report, "list-volumes").attacherText,
    "Driver's published state differs from VolumeAttachment, requeueing",
  );
  assert.match(byId(hidden.report, "list-volumes").message, /lists vol-1 published on no node/);

  const multi = await checkJson(["--multi-attach"]);
  assert.deepEqual(notPassed(multi.report), ["second-node: failed"]);
  assert.match(
    byId(multi.report, "second-node").message,
    /^the driver published a ReadWriteOnce volume to a second node \(example-node-2\)/,
  );
});

Deno.test("sandbox check: a secret value in the volume attributes fails the secrets check", async () => {
  const { code, report } = await checkJson([
    "--secret=password=hunter2-sandbox",
    "--volume-attributes=token=hunter2-sandbox",
  ]);
  assert.equal(code, 1);
  assert.deepEqual(notPassed(report), ["secrets: failed"]);
  assert.equal(
    byId(report, "secrets").message,
    "a secret value shows in the output, the attacher's log",
  );
  assert.doesNotMatch(byId(report, "secrets").message, /hunter2/);

  const clean = await check(["--secret=password=hunter2-sandbox"]);
  assert.equal(clean.code, 0, clean.lines.join("\n"));
  assert.doesNotMatch(clean.lines.join("\n"), /hunter2/);
});

Deno.test("sandbox check --skip and a missing driver: skipped with the reason", async () => {
  const skipped = await checkJson(["--skip=block,second-node", "--access-mode=ReadWriteMany"]);
  assert.equal(skipped.code, 0);
  assert.equal(byId(skipped.report, "block").message, "skipped with --skip");
  assert.deepEqual(notPassed(skipped.report), ["second-node: skipped", "block: skipped"]);

  const dir = await Deno.makeTempDir({ prefix: "sandbox-check-test-" });
  try {
    const missing = await checkJson([
      `--csi-address=${dir}/missing.sock`,
      "--volume-handle=v",
      "--node-id=n",
      "--wait-timeout=200ms",
    ]);
    assert.equal(missing.code, 1);
    const probe = byId(missing.report, "probe");
    assert.equal(probe.status, "failed");
    assert.equal(
      probe.attacherText,
      `timed out after 0.2s waiting to connect to the CSI driver at ${dir}/missing.sock: ` +
        `last error: dial unix ${dir}/missing.sock: connect: no such file or directory`,
    );
    for (const c of missing.report.checks.slice(1)) {
      assert.equal(c.status, "skipped", c.id);
      assert.equal(c.message, "the attacher exits at startup (see probe)", c.id);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sandbox check against a driver without capabilities: the checks that need them skipped", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-check-test-" });
  try {
    const example = new ExampleDriver({}, { nodeIds: ["worker-7"] });
    example.createVolume("vol-42");
    // Default capabilities: PUBLISH_UNPUBLISH_VOLUME only (no ListVolumes, no readonly).
    await using driver = await FakeCsiDriver.start({
      address: `${dir}/csi.sock`,
      pluginName: "plain.csi.example.com",
      permissive: example,
    });
    const plain = await checkJson([
      `--csi-address=${dir}/csi.sock`,
      "--volume-handle=vol-42",
      "--node-id=worker-7",
      "--secret=token=s3cr3t-value",
    ]);
    assert.equal(plain.code, 0);
    assert.deepEqual(notPassed(plain.report), [
      "list-volumes: skipped",
      "list-volumes-paging: skipped",
      "second-node: skipped",
      "read-only: skipped",
    ]);
    assert.equal(
      byId(plain.report, "list-volumes").message,
      "the attacher reconciles only with LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES",
    );
    assert.equal(byId(plain.report, "second-node").message, "no --second-node-id");
    assert.equal(
      byId(plain.report, "read-only").message,
      "the driver has no PUBLISH_READONLY: the attacher sends readonly=false",
    );
    // The secret reached the driver with publish and unpublish.
    const withSecret = driver.calls.filter((c) =>
      (c.request as { secrets?: Record<string, string> }).secrets?.token === "s3cr3t-value"
    ).map((c) => c.method);
    assert.deepEqual(withSecret, ["ControllerPublishVolume", "ControllerUnpublishVolume"]);
    assert.deepEqual(example.publications(), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }

  const dir2 = await Deno.makeTempDir({ prefix: "sandbox-check-test-" });
  try {
    await using _driver = await FakeCsiDriver.start({
      address: `${dir2}/csi.sock`,
      controllerCapabilities: [],
    });
    const none = await checkJson([
      `--csi-address=${dir2}/csi.sock`,
      "--volume-handle=v",
      "--node-id=n",
    ]);
    assert.equal(none.code, 0);
    assert.deepEqual(
      none.report.checks.filter((c) => c.status === "passed").map((c) => c.id),
      ["probe", "plugin-info", "capabilities"],
    );
    for (const c of none.report.checks.slice(3)) {
      assert.equal(
        c.message,
        "the driver has no PUBLISH_UNPUBLISH_VOLUME: the attacher marks VolumeAttachments " +
          "attached without calling it",
        c.id,
      );
    }
  } finally {
    await Deno.remove(dir2, { recursive: true });
  }
});

Deno.test("sandbox check rejects bad command lines with status 2 and the usage", async () => {
  for (
    const [args, first] of [
      [["--bogus"], "flag provided but not defined: -bogus"],
      [["extra"], 'unexpected argument "extra"'],
      [["--output=xml"], '--output must be text or json, not "xml"'],
      [["--skip=probe"], '--skip: no such check to skip: "probe"'],
      [["--fail=publish:Nope"], /^invalid value "publish:Nope" for flag -fail: /],
      [["--slow=attach:1s"], /^invalid value "attach:1s" for flag -slow: .*unknown call "attach"/],
      [
        ["--csi-address=/run/csi.sock", "--volume-handle=v", "--node-id=n", "--non-idempotent"],
        /are for the built-in driver only$/,
      ],
      [["--csi-address=/run/csi.sock"], /--volume-handle and --node-id must name a real volume/],
    ] as [string[], string | RegExp][]
  ) {
    const { code, lines } = await check(args);
    assert.equal(code, 2, args.join(" "));
    if (typeof first === "string") assert.equal(lines[0], first);
    else assert.match(lines[0]!, first);
    assert.equal(lines.slice(1).join("\n"), CHECK_USAGE);
  }
  const help = await check(["-h"]);
  assert.equal(help.code, 0);
  assert.equal(help.lines.join("\n"), CHECK_USAGE);
});
