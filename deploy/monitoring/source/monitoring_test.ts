/**
 * The monitoring files: generated from their source, the `PrometheusRule` equal to the plain rule
 * file, every alert with a runbook section and unit tests that fire and stay quiet, the
 * dashboard's queries narrowed by its variables, and Prometheus' own `promtool` agreeing.
 *
 * `promtool` (Debian's `prometheus` package) runs when it is on the PATH; without it those two
 * tests are ignored, unless `PROMTOOL_REQUIRED=1` (as `.ci/run` sets) makes them fail.
 *
 * @module
 */

import assert from "node:assert/strict";
import yaml from "js-yaml";
import { FILES, generatedFiles, MONITORING_DIR, parseArgs } from "./generate.ts";
import { ALERT_ORIGINS, ALERTS, type RuleGroup, ruleGroups } from "./rules.ts";
import { dashboard, panelQueries, VARIABLES } from "./dashboard.ts";

const UNIT_TESTS = new URL("alerts.promtool.yaml", import.meta.url);
const RULES = new URL(FILES.rules, MONITORING_DIR);

function read(name: string): string {
  return Deno.readTextFileSync(new URL(name, MONITORING_DIR));
}

/** Whether `promtool` runs here; a clear reason when it does not. */
function promtoolMissing(): string | undefined {
  try {
    const out = new Deno.Command("promtool", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .outputSync();
    return out.success ? undefined : "promtool --version failed";
  } catch {
    return "promtool is not on the PATH (apt-get install prometheus)";
  }
}

const MISSING = promtoolMissing();
const REQUIRED = Deno.env.get("PROMTOOL_REQUIRED") === "1";
const PROMTOOL_IGNORED = MISSING !== undefined && !REQUIRED;
const IGNORE_NOTE = PROMTOOL_IGNORED ? ` (ignored: ${MISSING})` : "";

async function promtool(args: string[]): Promise<{ ok: boolean; text: string }> {
  if (MISSING !== undefined) throw new Error(`PROMTOOL_REQUIRED=1 but ${MISSING}`);
  const out = await new Deno.Command("promtool", { args, stdout: "piped", stderr: "piped" })
    .output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { ok: out.success, text: decode(out.stdout) + decode(out.stderr) };
}

/** GitHub's anchor of a Markdown heading: lower case, spaces to `-`, punctuation dropped. */
export function headingAnchor(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^a-z0-9 _-]/g, "").replace(/ /g, "-");
}

interface UnitTestFile {
  rule_files: string[];
  tests: {
    name: string;
    alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[];
  }[];
}

Deno.test("monitoring: the committed files are what generate.ts writes", () => {
  for (const [name, text] of Object.entries(generatedFiles())) {
    assert.equal(read(name), text, `deploy/monitoring/${name} is stale: run deno task monitoring`);
  }
});

Deno.test("monitoring: the PrometheusRule holds exactly the groups of the rule file", () => {
  const plain = yaml.load(read(FILES.rules)) as { groups: RuleGroup[] };
  const crd = yaml.load(read(FILES.prometheusRule)) as {
    apiVersion: string;
    kind: string;
    spec: { groups: RuleGroup[] };
  };
  assert.equal(crd.apiVersion, "monitoring.coreos.com/v1");
  assert.equal(crd.kind, "PrometheusRule");
  assert.deepEqual(crd.spec.groups, plain.groups);
  assert.deepEqual(plain.groups, ruleGroups());
});

Deno.test("monitoring: settings change thresholds, for and the selector everywhere", () => {
  const groups = ruleGroups({
    selector: 'job="e2e"',
    attachPendingSeconds: 5,
    attachPendingFor: "3s",
    runbookUrl: "https://example.com/RUNBOOK.md",
  });
  const rules = groups.flatMap((g) => g.rules);
  const stuck = rules.find((r) => "alert" in r && r.alert === "CSIAttacherAttachStuck");
  assert.ok(stuck !== undefined && "alert" in stuck);
  assert.match(stuck.expr, /> 5$/);
  assert.equal(stuck.for, "3s");
  assert.equal(
    stuck.annotations.runbook_url,
    "https://example.com/RUNBOOK.md#csiattacherattachstuck",
  );
  for (const r of rules) {
    if ("record" in r && r.record.includes("errors")) continue; // reads a recorded series
    if ("alert" in r && r.alert === "CSIAttacherDriverErrors") continue;
    if ("alert" in r && r.alert === "CSIAttacherClientThrottled") continue;
    assert.match(r.expr, /job="e2e"/, `${"alert" in r ? r.alert : r.record} selects the targets`);
    assert.doesNotMatch(r.expr, /job="csi-attacher"/);
  }
  assert.deepEqual(parseArgs(['--selector=job="x"', "--set=attachPendingSeconds=60"]), {
    selector: 'job="x"',
    attachPendingSeconds: 60,
  });
  assert.deepEqual(parseArgs(["--set=errorFor=1h"]), { errorFor: "1h" });
  assert.throws(() => parseArgs(["--for=1s"]), /unknown argument "--for=1s"/);
  assert.throws(() => parseArgs(["--set=bogus=1"]), /unknown setting "bogus"/);
  assert.throws(() => parseArgs(["--set=restarts=many"]), /takes a number: "many"/);
});

Deno.test("monitoring: every alert has a runbook section, an origin and a README row", () => {
  const runbook = read("RUNBOOK.md");
  const anchors = new Set(
    [...runbook.matchAll(/^#{2,3} (.+)$/gm)].map((m) => headingAnchor(m[1]!)),
  );
  const alerts = ruleGroups().flatMap((g) => g.rules).filter((r) => "alert" in r);
  assert.deepEqual(alerts.map((a) => a.alert), [...ALERTS]);
  const monitoringReadme = read("README.md");
  const readme = Deno.readTextFileSync(new URL("../../README.md", MONITORING_DIR));
  for (const a of alerts) {
    const anchor = a.annotations.runbook_url.split("#")[1]!;
    assert.ok(anchors.has(anchor), `RUNBOOK.md has no section #${anchor} for ${a.alert}`);
    assert.ok(a.annotations.summary.length > 0 && a.annotations.description.length > 0);
    assert.ok(ALERT_ORIGINS[a.alert as keyof typeof ALERT_ORIGINS] !== undefined);
    assert.ok(
      monitoringReadme.includes(`\`${a.alert}\``),
      `deploy/monitoring/README.md: ${a.alert}`,
    );
    assert.ok(readme.includes(`\`${a.alert}\``), `README.md's Monitoring table: ${a.alert}`);
  }
});

Deno.test("monitoring: every alert has a unit test where it fires and one where it does not", () => {
  const file = yaml.load(Deno.readTextFileSync(UNIT_TESTS)) as UnitTestFile;
  assert.deepEqual(file.rule_files, [`../${FILES.rules}`]);
  const checks = file.tests.flatMap((t) => t.alert_rule_test ?? []);
  for (const alert of ALERTS) {
    const mine = checks.filter((c) => c.alertname === alert);
    assert.ok(mine.some((c) => c.exp_alerts.length > 0), `no test where ${alert} fires`);
    assert.ok(mine.some((c) => c.exp_alerts.length === 0), `no test where ${alert} stays quiet`);
  }
});

Deno.test("monitoring: the dashboard's data source is a variable and every query is narrowed", () => {
  const board = dashboard();
  const vars = (board.templating as { list: { name: string; type: string }[] }).list;
  assert.deepEqual(vars.map((v) => v.name), ["datasource", ...VARIABLES.map((v) => v.name)]);
  assert.equal(vars[0]!.type, "datasource");
  const text = JSON.stringify(board);
  assert.doesNotMatch(text, /"uid":"(?!\$\{datasource\})[^"]*"(?=[^}]*"type":"prometheus")/);
  const queries = panelQueries();
  assert.ok(queries.length >= 15, `only ${queries.length} queries`);
  for (const q of queries) {
    assert.match(q.expr, /job=~"\$job", instance=~"\$instance"/, q.panel);
  }
  for (
    const q of queries.filter((q) => /csi_sidecar_operations|csi_attacher_.*_duration/.test(q.expr))
  ) {
    assert.match(q.expr, /driver_name=~"\$driver"/, q.panel);
  }
});

Deno.test({
  name: `monitoring: promtool check rules accepts the rule file${IGNORE_NOTE}`,
  ignore: PROMTOOL_IGNORED,
  async fn() {
    const { ok, text } = await promtool(["check", "rules", RULES.pathname]);
    assert.ok(ok, text);
    const count = ruleGroups().flatMap((g) => g.rules).length;
    assert.match(text, new RegExp(`SUCCESS: ${count} rules found`), text);
  },
});

Deno.test({
  name: `monitoring: promtool test rules passes the alerts' unit tests${IGNORE_NOTE}`,
  ignore: PROMTOOL_IGNORED,
  async fn() {
    const { ok, text } = await promtool(["test", "rules", UNIT_TESTS.pathname]);
    assert.ok(ok, text);
    assert.match(text, /SUCCESS/);
  },
});
