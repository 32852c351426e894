/**
 * Writes the monitoring files of `deploy/monitoring/` from their one source (`rules.ts`,
 * `dashboard.ts`): the plain rule file `csi-attacher.rules.yaml`, the same groups as a Prometheus
 * Operator `PrometheusRule` in `prometheusrule.yaml`, and `dashboard.json`.
 *
 * Run with `deno task monitoring`; `-- --runbook-url=https://…/RUNBOOK.md` makes the alerts'
 * `runbook_url` an address your Alertmanager can link, `-- --selector='job="my-driver"'` selects
 * other scrape targets, `-- --set=attachPendingSeconds=600` changes a threshold (any field of
 * `RuleSettings`). `monitoring_test.ts` fails when a committed file differs from a fresh
 * generation with the default settings.
 *
 * @module
 */

import yaml from "js-yaml";
import { DEFAULT_RULE_SETTINGS, ruleGroups, type RuleSettings } from "./rules.ts";
import { dashboard } from "./dashboard.ts";

/** The folder the files are written to. */
export const MONITORING_DIR = new URL("../", import.meta.url);

/** File names, relative to {@link MONITORING_DIR}. */
export const FILES = {
  rules: "csi-attacher.rules.yaml",
  prometheusRule: "prometheusrule.yaml",
  dashboard: "dashboard.json",
} as const;

const HEADER = "# Written by `deno task monitoring` (deploy/monitoring/source/generate.ts) from " +
  "source/rules.ts:\n# edit that file, not this one. Alerts and runbook: deploy/monitoring/README.md.\n";

function dump(value: unknown): string {
  return yaml.dump(value, { lineWidth: -1, noRefs: true, quotingType: '"' });
}

/** The plain Prometheus rule file (`rule_files:`). */
export function rulesFileText(settings: Partial<RuleSettings> = {}): string {
  return HEADER + dump({ groups: ruleGroups(settings) });
}

/** The same groups as a `monitoring.coreos.com/v1` `PrometheusRule`. */
export function prometheusRuleText(settings: Partial<RuleSettings> = {}): string {
  return HEADER + dump({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: {
      name: "csi-attacher",
      namespace: "default",
      // kube-prometheus' Prometheus selects PrometheusRules with these labels.
      labels: { "app.kubernetes.io/name": "csi-attacher", prometheus: "k8s", role: "alert-rules" },
    },
    spec: { groups: ruleGroups(settings) },
  });
}

/** The Grafana dashboard. */
export function dashboardText(): string {
  return JSON.stringify(dashboard(), null, 2) + "\n";
}

/** Every generated file: name → text. */
export function generatedFiles(settings: Partial<RuleSettings> = {}): Record<string, string> {
  return {
    [FILES.rules]: rulesFileText(settings),
    [FILES.prometheusRule]: prometheusRuleText(settings),
    [FILES.dashboard]: dashboardText(),
  };
}

/**
 * Reads `--runbook-url=<address>`, `--selector=<label matchers>` and `--set=<setting>=<value>`
 * (any field of {@link RuleSettings}, e.g. `--set=attachPendingSeconds=600`).
 *
 * @throws {TypeError} for any other argument, an unknown setting or a number that is not one.
 */
export function parseArgs(args: readonly string[]): Partial<RuleSettings> {
  const settings: Record<string, string | number> = {};
  const fail = (why: string): never => {
    throw new TypeError(`Cannot generate the monitoring files: ${why}`);
  };
  for (const arg of args) {
    const m = /^--(runbook-url|selector|set)=(.+)$/.exec(arg);
    if (m === null) {
      fail(
        `unknown argument ${JSON.stringify(arg)} (takes --runbook-url=<address>, ` +
          `--selector=<label matchers> and --set=<setting>=<value>)`,
      );
    }
    const [key, value] = m![1] === "runbook-url"
      ? ["runbookUrl", m![2]!]
      : m![1] === "selector"
      ? ["selector", m![2]!]
      : [m![2]!.slice(0, Math.max(0, m![2]!.indexOf("="))), m![2]!.slice(m![2]!.indexOf("=") + 1)];
    const current = (DEFAULT_RULE_SETTINGS as unknown as Record<string, unknown>)[key];
    if (current === undefined) fail(`unknown setting ${JSON.stringify(key)}`);
    if (typeof current === "number") {
      const n = Number(value);
      if (value.trim() === "" || !Number.isFinite(n)) {
        fail(`setting ${key} takes a number: ${JSON.stringify(value)}`);
      }
      settings[key] = n;
    } else {
      settings[key] = value;
    }
  }
  return settings as Partial<RuleSettings>;
}

if (import.meta.main) {
  const settings = parseArgs(Deno.args);
  for (const [name, text] of Object.entries(generatedFiles(settings))) {
    await Deno.writeTextFile(new URL(name, MONITORING_DIR), text);
    console.log(`wrote deploy/monitoring/${name}`);
  }
  console.log(`runbook_url: ${settings.runbookUrl ?? DEFAULT_RULE_SETTINGS.runbookUrl}#<alert>`);
}
