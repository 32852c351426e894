/**
 * Writes the monitoring files of `deploy/monitoring/` from their one source (`rules.ts`,
 * `dashboard.ts`): the plain rule file `csi-attacher.rules.yaml`, the same groups as a Prometheus
 * Operator `PrometheusRule` in `prometheusrule.yaml`, a `podmonitor.yaml`, and `dashboard.json`.
 *
 * Two layouts are written: the attacher as its own Deployment (`deploy/monitoring/`) and as a
 * container of the driver's controller pod (`deploy/monitoring/sidecar/`); the dashboard serves
 * both. Run with `deno task monitoring`; `-- --runbook-base-url=https://…/blob/v0.1.0` makes the
 * alerts' `runbook_url` an address your Alertmanager can link, `-- --container=<name>` selects
 * another container name, `-- --labels=release=prom` sets the labels your Prometheus selects by,
 * `-- --set=attachPendingSeconds=600` changes a threshold (any field of `RuleSettings`); see
 * {@link parseGenerateArgs}. `monitoring_test.ts` fails when a committed file differs from a
 * fresh generation with the default settings.
 *
 * @module
 */

import yaml from "js-yaml";
import { DEFAULT_RULE_SETTINGS, ruleGroups, type RuleSettings } from "./rules.ts";
import { dashboard } from "./dashboard.ts";

/** The folder the files are written to. */
export const MONITORING_DIR = new URL("../", import.meta.url);

/** File names, relative to a layout's folder under {@link MONITORING_DIR}. */
export const FILES = {
  rules: "csi-attacher.rules.yaml",
  prometheusRule: "prometheusrule.yaml",
  podMonitor: "podmonitor.yaml",
  dashboard: "dashboard.json",
} as const;

/** The alerts' unit tests of the sidecar layout, written from `alerts.promtool.yaml`. */
export const SIDECAR_UNIT_TESTS = "source/alerts-sidecar.promtool.yaml";

/** Where the attacher runs, which decides how Prometheus finds it. */
export type LayoutName = "deployment" | "sidecar";

/** What a layout's files are made with, besides the rules' settings. */
export interface LayoutSettings {
  /** The folder of the layout's files under {@link MONITORING_DIR} ("" or ending in `/`). */
  dir: string;
  /** Namespace of the PodMonitor and the PrometheusRule. */
  namespace: string;
  /** Labels of the PodMonitor and the PrometheusRule (what your Prometheus selects them by). */
  labels: Record<string, string>;
  /** The pods the PodMonitor scrapes (`spec.selector.matchLabels`). */
  podSelector: Record<string, string>;
  /** The attacher container's port name (its `--http-endpoint`). */
  port: string;
  /** Why the PodMonitor looks as it does, written above it. */
  comment: string;
}

/**
 * kube-prometheus-stack's Prometheus selects PodMonitors and PrometheusRules labelled
 * `release: <Helm release name>`; `kube-prometheus-stack` is the name its documentation installs.
 * kube-prometheus (jsonnet) selects every one in its namespaces and needs no label.
 */
export const DEFAULT_LABELS: Readonly<Record<string, string>> = Object.freeze({
  release: "kube-prometheus-stack",
});

/** The two common layouts. */
export const LAYOUTS: Readonly<Record<LayoutName, LayoutSettings>> = Object.freeze({
  deployment: {
    dir: "",
    namespace: "default",
    labels: { ...DEFAULT_LABELS },
    podSelector: { app: "csi-attacher" },
    port: "http-endpoint",
    comment: "The attacher as its own Deployment (deploy/kubernetes/deployment.yaml): its pods " +
      "are labelled app: csi-attacher and serve --http-endpoint on the port http-endpoint.",
  },
  sidecar: {
    dir: "sidecar/",
    namespace: "kube-system",
    labels: { ...DEFAULT_LABELS },
    podSelector: { app: "csi-driver-controller" },
    port: "http-attacher",
    comment: "The attacher as a container of the driver's controller pod: set the selector to " +
      "that pod's labels and the port to the name of the attacher container's --http-endpoint " +
      "port. The job is the PodMonitor's (<namespace>/<name>), shared with whatever else the " +
      "pod serves; the rules and the dashboard find the attacher by its container label.",
  },
});

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
export function prometheusRuleText(
  settings: Partial<RuleSettings> = {},
  layout: LayoutSettings = LAYOUTS.deployment,
): string {
  return HEADER + dump({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: {
      name: "csi-attacher",
      namespace: layout.namespace,
      labels: { "app.kubernetes.io/name": "csi-attacher", ...layout.labels },
    },
    spec: { groups: ruleGroups(settings) },
  });
}

/** The `PodMonitor` of a layout. */
export function podMonitorText(layout: LayoutSettings = LAYOUTS.deployment): string {
  const comment = layout.comment.match(/.{1,96}(\s|$)/g)!.map((l) => `# ${l.trim()}\n`).join("");
  return HEADER.replace("source/rules.ts", "its layout") + comment + dump({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PodMonitor",
    metadata: {
      name: "csi-attacher",
      namespace: layout.namespace,
      labels: { "app.kubernetes.io/name": "csi-attacher", ...layout.labels },
    },
    spec: {
      selector: { matchLabels: layout.podSelector },
      podMetricsEndpoints: [{ port: layout.port, path: "/metrics", interval: "30s" }],
    },
  });
}

/** The Grafana dashboard; `container` is its `$container` variable's default. */
export function dashboardText(container?: string): string {
  return JSON.stringify(dashboard(container), null, 2) + "\n";
}

/**
 * The job the Prometheus Operator gives a PodMonitor's targets, `<namespace>/<name>`
 * (prometheus-operator `pkg/prometheus/promcfg.go`, the `job` relabelling of a PodMonitor).
 */
export const SIDECAR_JOB = `${LAYOUTS.sidecar.namespace}/csi-attacher`;

/**
 * The alerts' unit tests for the sidecar layout, from those of the Deployment layout: the
 * attacher's series carry the driver pod's job and pod names, so the series of the pod's other
 * containers (the source's `container="csi-provisioner"` cases) share job and pod with it.
 */
export function sidecarUnitTestsText(source: string): string {
  const pod = "csi-driver-controller";
  const text = source
    .replace(
      /^# Unit tests of the alerts in \.\.\/csi-attacher\.rules\.yaml[^\n]*\n/,
      "# Written by `deno task monitoring` (deploy/monitoring/source/generate.ts) from " +
        "alerts.promtool.yaml\n# for the sidecar layout: edit that file, not this one. Unit " +
        "tests of ../sidecar/csi-attacher.rules.yaml:\n",
    )
    .replace("  - ../csi-attacher.rules.yaml", "  - ../sidecar/csi-attacher.rules.yaml")
    // The attacher and the other sidecars of the source's cases are containers of one pod here.
    .replaceAll(/job="csi-(attacher|resizer|provisioner)"/g, `job="${SIDECAR_JOB}"`)
    .replaceAll("job: csi-attacher", `job: ${SIDECAR_JOB}`)
    .replaceAll("job csi-attacher)", `job ${SIDECAR_JOB})`)
    .replaceAll("of job csi-attacher ", `of job ${SIDECAR_JOB} `)
    .replaceAll('pod="csi-attacher-', `pod="${pod}-`)
    .replaceAll("pod: csi-attacher-", `pod: ${pod}-`)
    .replaceAll("kube-system/csi-attacher-", `kube-system/${pod}-`);
  return text;
}

/** Every generated file with the default settings: path under deploy/monitoring/ → text. */
export function generatedFiles(
  settings: Partial<RuleSettings> = {},
  layouts: Partial<Record<LayoutName, LayoutSettings>> = LAYOUTS,
): Record<string, string> {
  const files: Record<string, string> = {};
  for (const layout of Object.values(layouts)) {
    files[layout.dir + FILES.rules] = rulesFileText(settings);
    files[layout.dir + FILES.prometheusRule] = prometheusRuleText(settings, layout);
    files[layout.dir + FILES.podMonitor] = podMonitorText(layout);
  }
  files[FILES.dashboard] = dashboardText(settings.container);
  return files;
}

/** Parses `k=v,k2=v2`. */
function labelList(text: string, fail: (why: string) => never): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) fail(`not a label list (k=v,k2=v2): ${JSON.stringify(text)}`);
    labels[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return labels;
}

/** What the command line asks for. */
export interface GenerateArgs {
  settings: Partial<RuleSettings>;
  /** The layouts to write, with what the arguments change. */
  layouts: Partial<Record<LayoutName, LayoutSettings>>;
}

/**
 * Reads `--layout=deployment|sidecar` (default both), `--container=<name>`,
 * `--runbook-base-url=<address>`, `--runbook-url=<address>`, `--selector=<label matchers>`,
 * `--labels=k=v,...`, `--namespace=<ns>`, `--pod-selector=k=v,...`, `--port=<name>` and
 * `--set=<setting>=<value>` (any field of {@link RuleSettings}, e.g.
 * `--set=attachPendingSeconds=600`).
 *
 * @throws {TypeError} for any other argument, an unknown setting or a number that is not one.
 */
export function parseGenerateArgs(args: readonly string[]): GenerateArgs {
  const fail = (why: string): never => {
    throw new TypeError(`Cannot generate the monitoring files: ${why}`);
  };
  const ruleArgs: string[] = [];
  let names: LayoutName[] = ["deployment", "sidecar"];
  const change: Partial<LayoutSettings> = {};
  // `deno task monitoring -- --flag` passes the `--` on (as `deno task dev` does to main.ts):
  // a leading one is dropped.
  for (const arg of args[0] === "--" ? args.slice(1) : args) {
    const m = /^--(layout|labels|namespace|pod-selector|port)=(.+)$/.exec(arg);
    if (m === null) {
      ruleArgs.push(arg);
      continue;
    }
    const value = m[2]!;
    if (m[1] === "layout") {
      if (value !== "deployment" && value !== "sidecar") {
        fail(`--layout takes deployment or sidecar: ${JSON.stringify(value)}`);
      }
      names = [value as LayoutName];
    } else if (m[1] === "labels") change.labels = labelList(value, fail);
    else if (m[1] === "pod-selector") change.podSelector = labelList(value, fail);
    else if (m[1] === "namespace") change.namespace = value;
    else change.port = value;
  }
  const layouts: Partial<Record<LayoutName, LayoutSettings>> = {};
  for (const name of names) layouts[name] = { ...LAYOUTS[name], ...change };
  return { settings: parseArgs(ruleArgs), layouts };
}

/**
 * Reads the rules' arguments: `--runbook-base-url=<address>`, `--runbook-url=<address>`,
 * `--selector=<label matchers>`, `--container=<name>` and `--set=<setting>=<value>` (any field
 * of {@link RuleSettings}, e.g. `--set=attachPendingSeconds=600`).
 *
 * @throws {TypeError} for any other argument, an unknown setting or a number that is not one.
 */
export function parseArgs(args: readonly string[]): Partial<RuleSettings> {
  const settings: Record<string, string | number> = {};
  const fail = (why: string): never => {
    throw new TypeError(`Cannot generate the monitoring files: ${why}`);
  };
  const named: Record<string, keyof RuleSettings> = {
    "runbook-url": "runbookUrl",
    "runbook-base-url": "runbookBaseUrl",
    selector: "selector",
    container: "container",
  };
  for (const arg of args) {
    const m = /^--(runbook-url|runbook-base-url|selector|container|set)=(.+)$/.exec(arg);
    if (m === null) {
      fail(
        `unknown argument ${JSON.stringify(arg)} (takes --layout, --container, ` +
          `--runbook-base-url, --runbook-url, --selector, --labels, --namespace, ` +
          `--pod-selector, --port and --set=<setting>=<value>)`,
      );
    }
    const [key, value] = m![1] !== "set"
      ? [named[m![1]!]!, m![2]!]
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
  const { settings, layouts } = parseGenerateArgs(Deno.args);
  const files = generatedFiles(settings, layouts);
  if (layouts.sidecar !== undefined) {
    const source = await Deno.readTextFile(new URL("source/alerts.promtool.yaml", MONITORING_DIR));
    files[SIDECAR_UNIT_TESTS] = sidecarUnitTestsText(source);
  }
  for (const [name, text] of Object.entries(files)) {
    await Deno.mkdir(new URL(name.slice(0, name.lastIndexOf("/") + 1) || ".", MONITORING_DIR), {
      recursive: true,
    });
    await Deno.writeTextFile(new URL(name, MONITORING_DIR), text);
    console.log(`wrote deploy/monitoring/${name}`);
  }
  const runbook = settings.runbookUrl ||
    `${
      settings.runbookBaseUrl ?? DEFAULT_RULE_SETTINGS.runbookBaseUrl
    }/deploy/monitoring/RUNBOOK.md`;
  console.log(`runbook_url: ${runbook}#<alert>`);
}
