/**
 * `csi-attacher sandbox` in-process: the built-in example driver, and a scripted fake driver
 * behind `--csi-address` that answers errors, as a driver author would use it.
 */

import assert from "node:assert/strict";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { runSandbox, SANDBOX_USAGE } from "../../sandbox/main.ts";
import { FakeCsiDriver } from "../../testkit/csi/fake_driver.ts";

/** Runs the sandbox and collects its output. */
async function sandbox(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runSandbox(args, { write: (line) => lines.push(line) });
  return { code, lines };
}

/** The output as one text. */
function text(lines: string[]): string {
  return lines.join("\n");
}

/** Timeline lines with their number cut off. */
function timelineEntries(lines: string[]): string[] {
  return lines.filter((l) => /^ {0,2}\d+ {2}/.test(l)).map((l) => l.replace(/^ *\d+ {2}/, ""));
}

Deno.test("sandbox with the built-in driver attaches, detaches and releases: exit 0", async () => {
  const first = await sandbox([]);
  assert.equal(first.code, 0, text(first.lines));
  const entries = timelineEntries(first.lines);
  const expectedInOrder = [
    /^CSI +Probe\(\) → OK ready=true$/,
    /^CSI +GetPluginInfo\(\) → OK name=example\.csi\.k8s\.io/,
    /^sandbox +create persistentvolumes\/pv-1 \(driver example\.csi\.k8s\.io, volume handle vol-1/,
    /^sandbox +create csinodes\/node-1 \(driver example\.csi\.k8s\.io, node ID example-node-1\)$/,
    /^sandbox +create volumeattachments\/va-1/,
    /^API +patch persistentvolumes\/pv-1 +json: test \/metadata\/finalizers=null; add \/metadata\/finalizers=\["external-attacher\/example-csi-k8s-io"\]$/,
    /^API +patch volumeattachments\/va-1 +merge: .*metadata\.annotations=\{"csi\.alpha\.kubernetes\.io\/node-id":"example-node-1"\}/,
    /^CSI +ControllerPublishVolume\(volumeId=vol-1, nodeId=example-node-1, capability=mount SINGLE_NODE_WRITER, readonly=false\) → OK publishContext=\{"devicePath":"\/dev\/example\/vol-1"\}$/,
    /^API +patch volumeattachments\/va-1\/status +merge: status\.attached=true, status\.attachmentMetadata=\{"devicePath":"\/dev\/example\/vol-1"\}, status\.attachError=null, \(only if uid unchanged\)$/,
    /^sandbox +delete volumeattachments\/va-1$/,
    /^CSI +ControllerUnpublishVolume\(volumeId=vol-1, nodeId=example-node-1\) → OK$/,
    /^API +patch volumeattachments\/va-1 +merge: metadata\.finalizers=null, \(only if uid unchanged\)$/,
    /^sandbox +delete persistentvolumes\/pv-1$/,
    /^API +patch persistentvolumes\/pv-1 +json: test \/metadata\/finalizers\/0=external-attacher\/example-csi-k8s-io; remove \/metadata\/finalizers\/0$/,
    /^sandbox +stop the attacher$/,
  ];
  let at = 0;
  for (const pattern of expectedInOrder) {
    const found = entries.findIndex((e, i) => i >= at && pattern.test(e));
    assert.ok(found >= 0, `timeline lacks ${pattern} after entry ${at}:\n${entries.join("\n")}`);
    at = found + 1;
  }
  const out = text(first.lines);
  assert.match(out, /^Attached: va-1 has status\.attached=true/m);
  assert.match(out, /^Detached: va-1 is gone and the driver publishes nothing$/m);
  assert.match(out, /^Released: pv-1 is gone/m);
  assert.equal(first.lines.at(-1), "Outcome: OK");
  assert.doesNotMatch(out, /\/tmp\/|csi-attacher-sandbox-/, "no temporary paths in the output");

  // Deterministic: a second run prints exactly the same lines.
  const second = await sandbox([]);
  assert.equal(second.code, 0);
  assert.deepEqual(second.lines, first.lines);
});

Deno.test("sandbox against a driver that answers FailedPrecondition: the recorded error, exit 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-test-" });
  try {
    await using driver = await FakeCsiDriver.start({
      address: `${dir}/csi.sock`,
      pluginName: "busy.csi.example.com",
      // The attacher retries with backoff until the VolumeAttachment is deleted; how often
      // depends on timing, so every publish gets the error.
      script: Array.from({ length: 20 }, () => ({
        method: "ControllerPublishVolume" as const,
        expect: { volumeId: "vol-busy", nodeId: "node-busy" },
        error: { code: 9, message: "volume is busy" },
      })),
      permissive: new ExampleDriver({}, {}),
    });
    const { code, lines } = await sandbox([
      `--csi-address=${dir}/csi.sock`,
      "--volume-handle=vol-busy",
      "--node-id=node-busy",
      "--node-name=worker-3",
    ]);
    const out = text(lines);
    assert.equal(code, 1, out);
    assert.match(
      out,
      /^Attach failed: status\.attachError\.message: rpc error: code = FailedPrecondition desc = volume is busy$/m,
    );
    assert.match(
      out,
      /CSI +ControllerPublishVolume\(volumeId=vol-busy, nodeId=node-busy, .*\) → rpc error: code = FailedPrecondition desc = volume is busy/,
    );
    assert.match(out, /API +patch volumeattachments\/va-1\/status +merge: status\.attachError=/);
    // Cleaning up still detaches: the attacher cannot know whether the failed publish attached.
    assert.match(out, /CSI +ControllerUnpublishVolume\(volumeId=vol-busy, nodeId=node-busy\) → OK/);
    assert.equal(lines.at(-1), "Outcome: FAILED (attach error)");
    assert.deepEqual(driver.failures, []);
    assert.ok(driver.callsOf("ControllerPublishVolume").length >= 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sandbox --secret sends the secret to the driver and never prints its value", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-test-" });
  try {
    const example = new ExampleDriver({}, {});
    example.createVolume("vol-s");
    await using driver = await FakeCsiDriver.start({
      address: `${dir}/csi.sock`,
      pluginName: "secret.csi.example.com",
      permissive: example,
    });
    const { code, lines } = await sandbox([
      `--csi-address=unix://${dir}/csi.sock`,
      "--volume-handle=vol-s",
      "--node-id=n-s",
      "--secret=user=admin,password=hunter2",
      "--access-mode=ReadWriteMany",
      "--volume-attributes=pool=fast",
    ]);
    const out = text(lines);
    assert.equal(code, 0, out);
    assert.doesNotMatch(out, /hunter2/);
    assert.match(
      out,
      /sandbox +create secrets\/default\/sandbox-publish-secret \(keys: password, user\)/,
    );
    assert.match(out, /API +get secrets\/default\/sandbox-publish-secret/);
    assert.match(
      out,
      /ControllerPublishVolume\(volumeId=vol-s, nodeId=n-s, capability=mount MULTI_NODE_MULTI_WRITER, readonly=false, secrets=\*\*\*stripped\*\*\*, volumeContext=\{"pool":"fast"\}\) → OK/,
    );
    const publish = driver.callsOf("ControllerPublishVolume")[0];
    assert.deepEqual(publish?.request.secrets, { user: "admin", password: "hunter2" });
    assert.deepEqual(example.publications(), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sandbox rejects bad command lines with status 2 and the usage", async () => {
  const unknown = await sandbox(["--bogus"]);
  assert.equal(unknown.code, 2);
  assert.equal(unknown.lines[0], "flag provided but not defined: -bogus");
  assert.equal(text(unknown.lines.slice(1)), SANDBOX_USAGE);

  const stray = await sandbox(["extra"]);
  assert.equal(stray.code, 2);
  assert.match(stray.lines[0]!, /attacher flags go after --/);

  const external = await sandbox(["--csi-address=/run/csi/socket"]);
  assert.equal(external.code, 2);
  assert.match(external.lines[0]!, /--volume-handle and --node-id must name a real volume/);

  const badAttacherFlag = await sandbox(["--", "--worker-threads=0"]);
  assert.equal(badAttacherFlag.code, 1);
  assert.match(badAttacherFlag.lines[0]!, /worker-threads must be greater than zero/);

  const help = await sandbox(["-h"]);
  assert.equal(help.code, 0);
  assert.equal(text(help.lines), SANDBOX_USAGE);
});

Deno.test("sandbox reports a missing driver socket at once: exit 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-test-" });
  try {
    const { code, lines } = await sandbox([
      `--csi-address=${dir}/missing.sock`,
      "--volume-handle=v",
      "--node-id=n",
    ]);
    assert.equal(code, 1);
    assert.match(lines.join("\n"), /Cannot use the CSI driver at .*missing\.sock/);
    assert.equal(lines.at(-1), "Outcome: FAILED (no driver)");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sandbox --fail=publish:NotFound: the built-in driver's fault as attachError", async () => {
  const { code, lines } = await sandbox(["--fail=publish:NotFound"]);
  const out = text(lines);
  assert.equal(code, 1, out);
  assert.match(
    out,
    /^Attach failed: status\.attachError\.message: rpc error: code = NotFound desc = fault injected with --fail=publish:NotFound$/m,
  );
  assert.match(out, /^Detached: va-1 is gone and the driver publishes nothing$/m);
  assert.equal(lines.at(-1), "Outcome: FAILED (attach error)");

  const external = await sandbox([
    "--csi-address=/run/csi/socket",
    "--volume-handle=v",
    "--node-id=n",
    "--non-idempotent",
  ]);
  assert.equal(external.code, 2);
  assert.match(external.lines[0]!, /are for the built-in driver only$/);
});
