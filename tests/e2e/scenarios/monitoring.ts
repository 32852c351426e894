/**
 * Scenario 21: the alerts and the dashboard of `deploy/monitoring/` against a real Prometheus that
 * scrapes the attacher's `--http-endpoint`. The rules are the shipped ones with short thresholds
 * and `for` durations ({@link E2E_RULE_SETTINGS}), in the sidecar layout
 * (`deploy/monitoring/sidecar/`): the target is labelled as the Prometheus Operator labels the
 * attacher container of a driver's controller pod (`container`, `namespace`, `pod`, and the
 * PodMonitor's job `<namespace>/<name>`, which names no attacher), and rules and dashboard find it
 * by its container.
 *
 * A VolumeAttachment on a node whose CSINode names a node ID the driver does not know fails every
 * ControllerPublishVolume (NotFound): `CSIAttacherAttachStuck` goes pending, then firing, and
 * `CSIAttacherDriverErrors` with code NotFound too; once the CSINode names the right ID the VA
 * attaches and the stuck alert resolves. It is deleted (a second detach, for the latency panel), and
 * every query of every dashboard panel, and every dashboard variable, returns data without error
 * over the scenario's time range.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { ScenarioContext } from "../context.ts";
import { sleep, waitForLog, waitUntil } from "../kit.ts";
import { csiNode, node, PATHS } from "../objects.ts";
import { READY_LINE } from "./round_trip.ts";
import { LEASE_FLAGS } from "./leader_failover.ts";
import { type ActiveAlert, PrometheusServer, type QuerySeries } from "../prometheus.ts";
import { rulesFileText, SIDECAR_JOB } from "../../../deploy/monitoring/source/generate.ts";
import type { RuleSettings } from "../../../deploy/monitoring/source/rules.ts";
import { panelQueries, VARIABLES } from "../../../deploy/monitoring/source/dashboard.ts";

/** The job of the sidecar layout's PodMonitor. */
const JOB = SIDECAR_JOB;

/** The target labels of the attacher container in the driver's controller pod. */
const TARGET_LABELS = {
  container: "csi-attacher",
  namespace: "kube-system",
  pod: "csi-driver-controller-0",
};

/** Thresholds and durations short enough for a scenario of under a minute. */
export const E2E_RULE_SETTINGS: Partial<RuleSettings> = {
  attachPendingSeconds: 5,
  attachPendingFor: "5s",
  rateWindow: "20s",
  errorFor: "3s",
};

/** What `$__rate_interval` stands for with a 1 s scrape interval. */
const RATE_INTERVAL = "20s";

/** A dashboard expression with its variables replaced. */
export function substitute(
  expr: string,
  vars: { container: string; job: string; instance: string; driver: string },
): string {
  return expr.replaceAll("$__rate_interval", RATE_INTERVAL).replaceAll("$job", vars.job)
    .replaceAll("$container", vars.container)
    .replaceAll("$instance", vars.instance).replaceAll("$driver", vars.driver);
}

/** Grafana's `label_values(<selector>, <label>)` as the PromQL that lists the same values. */
export function labelValuesQuery(query: string): string {
  const m = /^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/.exec(query);
  if (m === null) throw new Error(`not a label_values() query: ${query}`);
  return `group by (${m[2]}) (${m[1]})`;
}

/** Whether a series has a value that is a number (not NaN). */
function hasNumber(series: QuerySeries[]): boolean {
  return series.some((s) => (s.values ?? []).some(([, v]) => !Number.isNaN(Number(v))));
}

/** The times (seconds after the VolumeAttachment's creation) of the alert's states. */
interface AlertTimes {
  pending?: number;
  firing?: number;
  resolved?: number;
}

export async function monitoring(ctx: ScenarioContext): Promise<void> {
  const { kit } = ctx;
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const httpPort = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const instance = `127.0.0.1:${httpPort}`;
  const attacher = ctx.startAttacher("a", {
    args: [...LEASE_FLAGS, `--http-endpoint=${instance}`],
  });
  await waitForLog(attacher, READY_LINE);
  const scenarioStart = Date.now();
  const prometheus = await PrometheusServer.start({
    dir: `${ctx.cluster.info.dir}/prometheus-${kit.prefix}`,
    rules: rulesFileText(E2E_RULE_SETTINGS),
    job: JOB,
    targets: [instance],
    labels: TARGET_LABELS,
    ownerPid: ctx.cluster.ownerPid,
  });
  try {
    await waitUntil(
      "Prometheus scraped the attacher",
      async () => {
        return (await prometheus.query(`up{job="${JOB}"} == 1`)).length === 1;
      },
      30_000,
      250,
    );

    // One attach and one detach, so that every histogram of the dashboard has data.
    const { pv: pvOk } = await kit.makeVolume("ok");
    const vaOk = await kit.createVa("ok", ctx.nodes[0]!, pvOk);
    await kit.waitAttached(vaOk);
    await kit.deleteVas([vaOk]);

    // A node whose CSINode names an ID the driver does not serve: every publish fails NotFound.
    const badNode = `${kit.prefix}-wrong-id`;
    await kit.api.createOk(PATHS.nodes, node(badNode));
    kit.track(`${PATHS.nodes}/${badNode}`);
    const csiNodePath = `${PATHS.csiNodes}/${badNode}`;
    await kit.api.createOk(
      PATHS.csiNodes,
      csiNode(badNode, ctx.cluster.info.driverName, "not-the-driver-node"),
    );
    kit.track(csiNodePath);
    const { pv } = await kit.makeVolume("stuck");
    const created = Date.now();
    const va = await kit.createVa("stuck", badNode, pv);
    const since = () => Number(((Date.now() - created) / 1000).toFixed(1));
    const times: AlertTimes = {};
    let driverErrors: ActiveAlert | undefined;
    const stuckAlert = (alerts: ActiveAlert[]) =>
      alerts.find((a) =>
        a.labels.alertname === "CSIAttacherAttachStuck" && a.labels.instance === instance
      );
    const stuck = await waitUntil(
      "CSIAttacherAttachStuck firing",
      async () => {
        const alerts = await prometheus.alerts();
        driverErrors ??= alerts.find((a) =>
          a.labels.alertname === "CSIAttacherDriverErrors" &&
          a.labels.grpc_status_code === "NotFound"
        );
        const alert = stuckAlert(alerts);
        if (alert !== undefined) times.pending ??= since();
        if (alert?.state === "firing") times.firing = since();
        return alert?.state === "firing" ? alert : undefined;
      },
      45_000,
      250,
    );
    assert.match(
      (await kit.va(va))?.status?.attachError?.message ?? "",
      /^rpc error: code = NotFound desc = Not matching Node ID not-the-driver-node/,
    );
    assert.equal(stuck.labels.operation, "attach");
    assert.equal(stuck.labels.job, JOB);
    assert.equal(stuck.labels.pod, TARGET_LABELS.pod);
    assert.match(stuck.annotations.runbook_url ?? "", /RUNBOOK\.md#csiattacherattachstuck$/);
    assert.match(stuck.annotations.description ?? "", new RegExp(`target ${instance} \\(job`));
    await waitUntil(
      "CSIAttacherDriverErrors for NotFound",
      async () => {
        driverErrors ??= (await prometheus.alerts()).find((a) =>
          a.labels.alertname === "CSIAttacherDriverErrors" &&
          a.labels.grpc_status_code === "NotFound"
        );
        return driverErrors;
      },
      15_000,
      250,
    );
    assert.equal(driverErrors!.labels.method_name, "/csi.v1.Controller/ControllerPublishVolume");
    assert.equal(driverErrors!.labels.driver_name, ctx.cluster.info.driverName);

    // The fix: the CSINode names the node ID the driver serves; the VA attaches on its next retry.
    const fixedAt = since();
    await kit.api.deleteOk(csiNodePath);
    await kit.waitGone(csiNodePath, 30_000);
    await kit.api.createOk(
      PATHS.csiNodes,
      csiNode(badNode, ctx.cluster.info.driverName, ctx.nodeId),
    );
    await kit.waitAttached(va, 30_000);
    const attachedAt = since();
    await waitUntil(
      "CSIAttacherAttachStuck resolved",
      async () => {
        return stuckAlert(await prometheus.alerts()) === undefined;
      },
      30_000,
      250,
    );
    times.resolved = since();
    console.log(
      `    CSIAttacherAttachStuck (threshold ${E2E_RULE_SETTINGS.attachPendingSeconds} s, for ` +
        `${E2E_RULE_SETTINGS.attachPendingFor}), seconds after the VA's creation: pending ` +
        `${times.pending}, firing ${times.firing}; CSINode fixed at ${fixedAt}, attached ` +
        `${attachedAt}, resolved ${times.resolved}; CSIAttacherDriverErrors ` +
        `${driverErrors!.state} (NotFound, ${Number(driverErrors!.value).toFixed(2)} of publishes)`,
    );
    assert.ok(times.pending! <= times.firing!, "pending before firing");

    // A second detach: a histogram series appears with its first observation, so rate() needs a
    // second one to show a latency.
    await kit.deleteVas([va]);
    await waitUntil(
      "Prometheus scraped the second detach",
      async () => {
        const count = await prometheus.query(
          `csi_attacher_detach_duration_seconds_count{instance="${instance}"} >= 2`,
        );
        return count.length > 0;
      },
      15_000,
      250,
    );
    // A range query's last step may fall up to one step before now: let two more scrapes in.
    await sleep(2_000);

    // Every dashboard query and variable, over the scenario's time range.
    const vars = {
      container: TARGET_LABELS.container,
      job: JOB,
      instance,
      driver: ctx.cluster.info.driverName,
    };
    const end = Date.now();
    const failures: string[] = [];
    const checked = [
      ...panelQueries().map((q) => ({
        what: `panel "${q.panel}"`,
        expr: substitute(q.expr, vars),
      })),
      ...VARIABLES.map((v) => ({
        what: `variable $${v.name}`,
        expr: substitute(labelValuesQuery(v.query), vars),
      })),
    ];
    for (const { what, expr } of checked) {
      try {
        const series = await prometheus.queryRange(expr, scenarioStart, end, 1);
        if (!hasNumber(series)) failures.push(`${what}: no data for ${expr}`);
      } catch (err) {
        failures.push(`${what}: ${err instanceof Error ? err.message : err}`);
      }
    }
    console.log(
      `    dashboard: ${checked.length} queries (${panelQueries().length} panel queries, ` +
        `${VARIABLES.length} variables) checked against Prometheus, ${failures.length} failing`,
    );
    assert.deepEqual(failures, [], "every dashboard query returns data");
  } finally {
    await prometheus.stop();
  }
}
