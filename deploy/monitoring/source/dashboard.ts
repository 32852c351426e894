/**
 * The Grafana dashboard of the attacher (`deploy/monitoring/dashboard.json`, written by
 * `generate.ts`): the data source is a variable (`$datasource`), and `$job`, `$driver` and
 * `$instance` narrow every query. Each panel says in its description whether the Go
 * csi-attacher exports what it reads.
 *
 * The end-to-end suite runs every panel query (and every variable query) against a real
 * Prometheus that scraped the attacher (`tests/e2e/scenarios/monitoring.ts`).
 *
 * @module
 */

/** Which attacher exports what a panel reads (as in `rules.ts`). */
export type Origin = "both" | "deno";

/** One query of a panel. */
export interface PanelQuery {
  expr: string;
  legend: string;
}

/** One panel before layout. */
export interface PanelSpec {
  title: string;
  description: string;
  origin: Origin;
  unit: string;
  queries: PanelQuery[];
  /** `stat` for a single number, else a time series. */
  kind?: "stat" | "timeseries";
}

/** A row of panels. */
export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

/**
 * The selector of every query: the variables. `$container` (a text box, `csi-attacher` unless
 * generated with `--container`) picks the attacher's targets in any layout: its own Deployment or
 * a container of the driver's controller pod, whose job and pod it shares with other sidecars.
 */
const T = 'container=~"$container", job=~"$job", instance=~"$instance"';
/** The selector of the queries of CSI calls, which carry the driver's name. */
const D = `${T}, driver_name=~"$driver"`;
const PUBLISH = 'method_name=~"/csi.v1.Controller/Controller(Un)?PublishVolume"';
const W = "[$__rate_interval]";

/** The dashboard's rows and panels. */
export const ROWS: readonly RowSpec[] = [
  {
    title: "Health",
    panels: [
      {
        title: "Targets up",
        description: "1 when Prometheus scraped the attacher's --http-endpoint.",
        origin: "both",
        unit: "none",
        kind: "stat",
        queries: [{ expr: `up{${T}}`, legend: "{{instance}}" }],
      },
      {
        title: "Leader",
        description: "leader_election_master_status: 1 on the replica that holds the Lease " +
          "(with --leader-election). A standby of this attacher reports nothing until it has " +
          "led once; the Go csi-attacher reports 0 with an empty name.",
        origin: "both",
        unit: "none",
        queries: [{ expr: `leader_election_master_status{${T}}`, legend: "{{instance}} {{name}}" }],
      },
      {
        title: "Process starts in the last hour",
        description: "How often process_start_time_seconds changed: restarts of the attacher.",
        origin: "both",
        unit: "none",
        queries: [{
          expr: `changes(process_start_time_seconds{${T}}[1h])`,
          legend: "{{instance}}",
        }],
      },
    ],
  },
  {
    title: "VolumeAttachments",
    panels: [
      {
        title: "Oldest pending VolumeAttachment",
        description: "csi_attacher_oldest_pending_seconds: age of the oldest VolumeAttachment " +
          "waiting to attach (since its creation) or to detach (since its deletion); 0 on " +
          "standbys.",
        origin: "deno",
        unit: "s",
        queries: [{
          expr: `csi_attacher_oldest_pending_seconds{${T}}`,
          legend: "{{instance}} {{operation}}",
        }],
      },
      {
        title: "Pending VolumeAttachments",
        description: "csi_attacher_pending_volumeattachments: VolumeAttachments not yet " +
          "attached, or deleted and not yet detached.",
        origin: "deno",
        unit: "none",
        queries: [{
          expr: `csi_attacher_pending_volumeattachments{${T}}`,
          legend: "{{instance}} {{operation}}",
        }],
      },
      {
        title: "Attach and detach latency, end to end (p99)",
        description: "From a VolumeAttachment's creation (deletion) to attached: true " +
          "(finalizer removed): what a Pod waits for.",
        origin: "deno",
        unit: "s",
        queries: [
          {
            expr: `histogram_quantile(0.99, sum by (le) (rate(` +
              `csi_attacher_attach_duration_seconds_bucket{${D}}${W})))`,
            legend: "attach",
          },
          {
            expr: `histogram_quantile(0.99, sum by (le) (rate(` +
              `csi_attacher_detach_duration_seconds_bucket{${D}}${W})))`,
            legend: "detach",
          },
        ],
      },
    ],
  },
  {
    title: "CSI driver",
    panels: [
      {
        title: "ControllerPublish/Unpublish calls by gRPC code",
        description: "csi_sidecar_operations_seconds_count per second, by method and code.",
        origin: "both",
        unit: "reqps",
        queries: [{
          expr: `sum by (method_name, grpc_status_code) (rate(` +
            `csi_sidecar_operations_seconds_count{${D}, ${PUBLISH}}${W}))`,
          legend: "{{method_name}} {{grpc_status_code}}",
        }],
      },
      {
        title: "ControllerPublish/Unpublish error ratio by gRPC code",
        description: "Share of the calls answered with each code other than OK " +
          "(the CSIAttacherDriverErrors alert).",
        origin: "both",
        unit: "percentunit",
        queries: [{
          expr: `sum by (method_name, grpc_status_code) (rate(` +
            `csi_sidecar_operations_seconds_count{${D}, ${PUBLISH}, grpc_status_code!="OK"}${W}))` +
            `\n/ on (method_name) group_left ()\nsum by (method_name) (rate(` +
            `csi_sidecar_operations_seconds_count{${D}, ${PUBLISH}}${W}))`,
          legend: "{{method_name}} {{grpc_status_code}}",
        }],
      },
      {
        title: "CSI call latency (p99) by method",
        description: "csi_sidecar_operations_seconds: one gRPC call to the driver.",
        origin: "both",
        unit: "s",
        queries: [{
          expr: `histogram_quantile(0.99, sum by (le, method_name) (rate(` +
            `csi_sidecar_operations_seconds_bucket{${D}}${W})))`,
          legend: "{{method_name}}",
        }],
      },
    ],
  },
  {
    title: "Work queues",
    panels: [
      {
        title: "Queue depth",
        description: "workqueue_depth of csi-attacher-va and csi-attacher-pv; this attacher " +
          "adds its attach and detach lanes (csi-attacher-va-attach, csi-attacher-va-detach).",
        origin: "both",
        unit: "none",
        queries: [{
          expr: `workqueue_depth{${T}, name=~"csi-attacher-.*"}`,
          legend: "{{instance}} {{name}}",
        }],
      },
      {
        title: "Time in queue (p99)",
        description: "workqueue_queue_duration_seconds: how long a key waited for a worker.",
        origin: "both",
        unit: "s",
        queries: [{
          expr: `histogram_quantile(0.99, sum by (le, name) (rate(` +
            `workqueue_queue_duration_seconds_bucket{${T}, name=~"csi-attacher-.*"}${W})))`,
          legend: "{{name}}",
        }],
      },
      {
        title: "Retries",
        description: "workqueue_retries_total per second: keys requeued after a failure.",
        origin: "both",
        unit: "ops",
        queries: [{
          expr: `sum by (name) (rate(workqueue_retries_total{${T}, name=~"csi-attacher-.*"}${W}))`,
          legend: "{{name}}",
        }],
      },
    ],
  },
  {
    title: "API server client",
    panels: [
      {
        title: "API requests by code",
        description: "rest_client_requests_total per second (every try).",
        origin: "deno",
        unit: "reqps",
        queries: [{
          expr: `sum by (method, code) (rate(rest_client_requests_total{${T}}${W}))`,
          legend: "{{method}} {{code}}",
        }],
      },
      {
        title: "Client-side rate limiter wait (p90, p99)",
        description: "rest_client_rate_limiter_duration_seconds: time a request waited for " +
          "--kube-api-qps/--kube-api-burst (the CSIAttacherClientThrottled alert).",
        origin: "deno",
        unit: "s",
        queries: [
          {
            expr: `histogram_quantile(0.9, sum by (le, instance) (rate(` +
              `rest_client_rate_limiter_duration_seconds_bucket{${T}}${W})))`,
            legend: "{{instance}} p90",
          },
          {
            expr: `histogram_quantile(0.99, sum by (le, instance) (rate(` +
              `rest_client_rate_limiter_duration_seconds_bucket{${T}}${W})))`,
            legend: "{{instance}} p99",
          },
        ],
      },
    ],
  },
  {
    title: "Process",
    panels: [
      {
        title: "Resident memory",
        description: "process_resident_memory_bytes (the CSIAttacherMemoryNearLimit alert " +
          "compares it with the container's limit).",
        origin: "both",
        unit: "bytes",
        queries: [{
          expr: `process_resident_memory_bytes{${T}}`,
          legend: "{{instance}}",
        }],
      },
      {
        title: "JavaScript heap",
        description: "deno_heap_used_bytes and deno_heap_total_bytes, in place of the Go " +
          "runtime's go_memstats_*.",
        origin: "deno",
        unit: "bytes",
        queries: [
          { expr: `deno_heap_used_bytes{${T}}`, legend: "{{instance}} used" },
          { expr: `deno_heap_total_bytes{${T}}`, legend: "{{instance}} total" },
        ],
      },
      {
        title: "CPU",
        description: "process_cpu_seconds_total per second.",
        origin: "both",
        unit: "percentunit",
        queries: [{
          expr: `rate(process_cpu_seconds_total{${T}}${W})`,
          legend: "{{instance}}",
        }],
      },
    ],
  },
];

/** A dashboard variable: its name and the PromQL-with-`label_values` query Grafana runs. */
export interface VariableSpec {
  name: string;
  label: string;
  /** Grafana's `label_values(<series selector>, <label>)`. */
  query: string;
  /** Whether "All" (the regex `.*`) may be chosen. */
  all: boolean;
}

/** The query variables, in the order Grafana resolves them. */
export const VARIABLES: readonly VariableSpec[] = [
  {
    name: "job",
    label: "Job",
    query: 'label_values(workqueue_depth{container=~"$container", name="csi-attacher-va"}, job)',
    all: false,
  },
  {
    name: "driver",
    label: "Driver",
    query:
      'label_values(csi_sidecar_operations_seconds_count{container=~"$container", job=~"$job"}, driver_name)',
    all: true,
  },
  {
    name: "instance",
    label: "Instance",
    query:
      'label_values(workqueue_depth{container=~"$container", job=~"$job", name="csi-attacher-va"}, instance)',
    all: true,
  },
];

const DATASOURCE = { type: "prometheus", uid: "${datasource}" };

/** The default of the dashboard's `$container` variable. */
export const DEFAULT_CONTAINER = "csi-attacher";

/**
 * The dashboard as Grafana's JSON model (schema version 39); `container` is the default of its
 * `$container` text box, which users change in Grafana.
 */
export function dashboard(container: string = DEFAULT_CONTAINER): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of ROWS) {
    panels.push({
      type: "row",
      id: id++,
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
      panels: [],
    });
    y += 1;
    const width = Math.floor(24 / row.panels.length);
    row.panels.forEach((p, i) => {
      panels.push(panel(p, id++, { h: 8, w: width, x: i * width, y }));
    });
    y += 8;
  }
  return {
    title: "CSI attacher",
    uid: "csi-attacher",
    description: "The CSI external-attacher: VolumeAttachments, CSI calls, queues, API client " +
      "and process. deploy/monitoring/README.md says which panels need this attacher.",
    tags: ["csi", "storage", "kubernetes"],
    editable: true,
    graphTooltip: 1,
    schemaVersion: 39,
    version: 1,
    refresh: "30s",
    time: { from: "now-3h", to: "now" },
    timepicker: {},
    timezone: "",
    annotations: { list: [] },
    links: [],
    templating: {
      list: [
        {
          name: "datasource",
          label: "Data source",
          type: "datasource",
          query: "prometheus",
          current: {},
          hide: 0,
          options: [],
          refresh: 1,
          regex: "",
        },
        {
          name: "container",
          label: "Container",
          description: "The attacher's container name (the Prometheus target label container)",
          type: "textbox",
          query: container,
          current: { text: container, value: container },
          options: [{ selected: true, text: container, value: container }],
          hide: 0,
        },
        ...VARIABLES.map((v) => ({
          name: v.name,
          label: v.label,
          type: "query",
          datasource: DATASOURCE,
          definition: v.query,
          query: { query: v.query, refId: `PrometheusVariableQueryEditor-${v.name}` },
          current: {},
          hide: 0,
          includeAll: v.all,
          multi: v.all,
          ...(v.all ? { allValue: ".*" } : {}),
          options: [],
          refresh: 2,
          regex: "",
          sort: 1,
        })),
      ],
    },
    panels,
  };
}

function panel(
  p: PanelSpec,
  id: number,
  gridPos: { h: number; w: number; x: number; y: number },
): Record<string, unknown> {
  const go = p.origin === "both"
    ? "The Go csi-attacher exports the same metrics."
    : "The Go csi-attacher has no such metric.";
  return {
    type: p.kind ?? "timeseries",
    id,
    title: p.title,
    description: `${p.description} ${go}`,
    datasource: DATASOURCE,
    gridPos,
    fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
    options: p.kind === "stat"
      ? { reduceOptions: { calcs: ["lastNotNull"], fields: "", values: false } }
      : { legend: { displayMode: "list", placement: "bottom", showLegend: true } },
    targets: p.queries.map((q, i) => ({
      datasource: DATASOURCE,
      expr: q.expr,
      legendFormat: q.legend,
      refId: String.fromCharCode(65 + i),
    })),
  };
}

/** Every PromQL query of the panels, with the title of its panel. */
export function panelQueries(): { panel: string; expr: string }[] {
  return ROWS.flatMap((r) =>
    r.panels.flatMap((p) => p.queries.map((q) => ({ panel: p.title, expr: q.expr })))
  );
}
