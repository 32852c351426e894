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
import {
  FILES,
  generatedFiles,
  LAYOUTS,
  MONITORING_DIR,
  parseArgs,
  parseGenerateArgs,
  SIDECAR_JOB,
  SIDECAR_UNIT_TESTS,
  sidecarUnitTestsText,
} from "./generate.ts";
import { ALERT_ORIGINS, ALERTS, type RuleGroup, ruleGroups } from "./rules.ts";
import { dashboard, panelQueries, VARIABLES } from "./dashboard.ts";

const UNIT_TESTS = new URL("alerts.promtool.yaml", import.meta.url);
/** The alerts' unit tests and the rule file of each layout. */
const LAYOUT_TESTS = [
  { layout: "deployment", tests: UNIT_TESTS, rules: new URL(FILES.rules, MONITORING_DIR) },
  {
    layout: "sidecar",
    tests: new URL(SIDECAR_UNIT_TESTS, MONITORING_DIR),
    rules: new URL(LAYOUTS.sidecar.dir + FILES.rules, MONITORING_DIR),
  },
] as const;

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

Deno.test("monitoring: the committed files are what generate.ts writes, both layouts", () => {
  const files: Record<string, string> = {
    ...generatedFiles(),
    [SIDECAR_UNIT_TESTS]: sidecarUnitTestsText(Deno.readTextFileSync(UNIT_TESTS)),
  };
  assert.ok(files["sidecar/podmonitor.yaml"] !== undefined);
  for (const [name, text] of Object.entries(files)) {
    assert.equal(read(name), text, `deploy/monitoring/${name} is stale: run deno task monitoring`);
  }
});

Deno.test("monitoring: each layout's PrometheusRule holds exactly the groups of its rule file", () => {
  for (const layout of Object.values(LAYOUTS)) {
    const plain = yaml.load(read(layout.dir + FILES.rules)) as { groups: RuleGroup[] };
    const crd = yaml.load(read(layout.dir + FILES.prometheusRule)) as {
      apiVersion: string;
      kind: string;
      metadata: { labels: Record<string, string> };
      spec: { groups: RuleGroup[] };
    };
    assert.equal(crd.apiVersion, "monitoring.coreos.com/v1");
    assert.equal(crd.kind, "PrometheusRule");
    // What kube-prometheus-stack's Prometheus selects by default.
    assert.equal(crd.metadata.labels.release, "kube-prometheus-stack");
    assert.deepEqual(crd.spec.groups, plain.groups);
    assert.deepEqual(plain.groups, ruleGroups());
  }
});

Deno.test("monitoring: the rules find the attacher by its container, its runbook on the web", () => {
  for (const r of ruleGroups().flatMap((g) => g.rules)) {
    assert.doesNotMatch(r.expr, /job=/, "no job is assumed");
    if ("alert" in r) {
      assert.match(
        r.annotations.runbook_url,
        /^https:\/\/github\.com\/[^/]+\/[^/]+\/blob\/main\/deploy\/monitoring\/RUNBOOK\.md#csiattacher/,
      );
    }
  }
  const selects = (groups: RuleGroup[], m: string) =>
    groups.flatMap((g) => g.rules).filter((r) => r.expr.includes(m)).length;
  assert.ok(selects(ruleGroups(), 'container="csi-attacher"') >= 8);
  assert.ok(selects(ruleGroups({ container: "attacher" }), 'container="attacher"') >= 8);
  const stuck = ruleGroups({ runbookBaseUrl: "https://git.example.com/x/blob/v1" })
    .flatMap((g) => g.rules).find((r) => "alert" in r);
  assert.ok(stuck !== undefined && "alert" in stuck);
  assert.equal(
    stuck.annotations.runbook_url,
    "https://git.example.com/x/blob/v1/deploy/monitoring/RUNBOOK.md#csiattachernoleader",
  );
  // The layouts differ in what the PodMonitor scrapes; the labels, the selector and the port are
  // settable.
  const pm = (dir: string) =>
    yaml.load(read(dir + FILES.podMonitor)) as {
      metadata: { labels: Record<string, string> };
      spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: unknown[] };
    };
  assert.deepEqual(pm("").spec.selector.matchLabels, { app: "csi-attacher" });
  assert.deepEqual(pm("sidecar/").spec.selector.matchLabels, { app: "csi-driver-controller" });
  assert.equal(pm("sidecar/").metadata.labels.release, "kube-prometheus-stack");
  const args = parseGenerateArgs([
    "--layout=sidecar",
    "--labels=prometheus=main",
    "--pod-selector=app=my-driver",
    "--port=metrics",
    "--container=attacher",
  ]);
  assert.deepEqual(Object.keys(args.layouts), ["sidecar"]);
  assert.deepEqual(args.layouts.sidecar!.labels, { prometheus: "main" });
  assert.deepEqual(args.layouts.sidecar!.podSelector, { app: "my-driver" });
  assert.equal(args.layouts.sidecar!.port, "metrics");
  assert.deepEqual(args.settings, { container: "attacher" });
  assert.throws(() => parseGenerateArgs(["--layout=daemonset"]), /deployment or sidecar/);
  // As deploy/monitoring/README.md runs it (`deno task monitoring -- --layout=sidecar ...`).
  assert.deepEqual(
    parseGenerateArgs(["--", "--layout=sidecar", "--container=attacher"]),
    parseGenerateArgs(["--layout=sidecar", "--container=attacher"]),
  );
  // The sidecar layout's unit tests put the attacher and the other sidecars in one job.
  const sidecarTests = read(SIDECAR_UNIT_TESTS);
  assert.match(sidecarTests, new RegExp(`job="${SIDECAR_JOB}", container="csi-provisioner"`));
  assert.doesNotMatch(sidecarTests, /job="csi-attacher"/);
});

Deno.test("monitoring: settings change thresholds, for and the selector everywhere", () => {
  // An explicit selector replaces the container's.
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
    assert.doesNotMatch(r.expr, /\{container="csi-attacher"/);
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
  const sidecar = yaml.load(read(SIDECAR_UNIT_TESTS)) as UnitTestFile;
  assert.deepEqual(sidecar.rule_files, [`../${LAYOUTS.sidecar.dir}${FILES.rules}`]);
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
  assert.deepEqual(vars.map((v) => v.name), [
    "datasource",
    "container",
    ...VARIABLES.map((v) => v.name),
  ]);
  assert.equal(vars[0]!.type, "datasource");
  const text = JSON.stringify(board);
  assert.doesNotMatch(text, /"uid":"(?!\$\{datasource\})[^"]*"(?=[^}]*"type":"prometheus")/);
  const queries = panelQueries();
  assert.ok(queries.length >= 15, `only ${queries.length} queries`);
  for (const q of queries) {
    assert.match(q.expr, /container=~"\$container", job=~"\$job", instance=~"\$instance"/, q.panel);
  }
  for (
    const q of queries.filter((q) => /csi_sidecar_operations|csi_attacher_.*_duration/.test(q.expr))
  ) {
    assert.match(q.expr, /driver_name=~"\$driver"/, q.panel);
  }
});

for (const { layout, tests, rules } of LAYOUT_TESTS) {
  Deno.test({
    name: `monitoring: promtool check rules accepts the ${layout} layout's rule file${IGNORE_NOTE}`,
    ignore: PROMTOOL_IGNORED,
    async fn() {
      const { ok, text } = await promtool(["check", "rules", rules.pathname]);
      assert.ok(ok, text);
      const count = ruleGroups().flatMap((g) => g.rules).length;
      assert.match(text, new RegExp(`SUCCESS: ${count} rules found`), text);
    },
  });

  Deno.test({
    name: `monitoring: promtool test rules passes the ${layout} layout's unit tests${IGNORE_NOTE}`,
    ignore: PROMTOOL_IGNORED,
    async fn() {
      const { ok, text } = await promtool(["test", "rules", tests.pathname]);
      assert.ok(ok, text);
      assert.match(text, /SUCCESS/);
    },
  });
}
