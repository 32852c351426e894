/**
 * The end-to-end suite: our attacher against a real kube-apiserver, kube-controller-manager (its
 * attach/detach controller turns the Pods of scenarios 10-15 into VolumeAttachments), etcd and a
 * real CSI driver, all on loopback, started and stopped here. Run it with `deno task e2e` (needs
 * Go and openssl; the first run builds the programs, see `binaries.ts`).
 *
 * Environment (all optional): `E2E_KUBERNETES` (the minor to run against: 1.35, 1.36 or 1.37, the
 * default; see `binaries.ts`), `E2E_CACHE_DIR` (default `~/.cache/csi-attacher-e2e`), `GO`
 * (default `go` on PATH, else `/usr/local/go/bin/go`), `E2E_GO_JOBS` (default 2), `E2E_ONLY`
 * (comma-separated scenario numbers to run), `E2E_KEEP=1` (keep the working directory),
 * `E2E_ATTACHER_ENTRY` (a program to run instead of `main.ts`, e.g. a bundle; `bundle` bundles
 * `main.ts` first), `E2E_TOLERATE` (causes of repeated
 * ControllerPublishVolume calls to report as warnings instead of failures, e.g.
 * `stale-cache,reconcile-forced`; see `publish_analysis.ts`).
 *
 * @module
 */

import { DEFAULT_KUBERNETES, kubernetesRelease } from "./binaries.ts";
import { LocalCluster } from "./cluster.ts";
import { ScenarioContext } from "./context.ts";
import { attachDetachRoundTrip, pvDeletedWhileAttached } from "./scenarios/round_trip.ts";
import { manyAttachments } from "./scenarios/many_attachments.ts";
import { leaderFailover } from "./scenarios/leader_failover.ts";
import { driverRestart } from "./scenarios/driver_restart.ts";
import { apiserverRestart } from "./scenarios/apiserver_restart.ts";
import { badObjects } from "./scenarios/bad_objects.ts";
import { silentConnections, throttledApiServer } from "./scenarios/api_faults.ts";
import {
  attacherRestartUnderLoad,
  manyPods,
  nodeDeleted,
  podAttachDetach,
  podBadInput,
  podMovesNode,
} from "./scenarios/pods.ts";
import { checkRbacSufficient } from "./rbac_check.ts";
import { compareWithMemoryApiServer } from "./api_differences.ts";
import { ensureSettingsBinaries, resolveSettings } from "./settings.ts";
import { createCanaryNode, runControllerCanary } from "./controller_canary.ts";
import { bundleAttacher } from "./bundle.ts";
import { idleDriverStop } from "./scenarios/idle_driver_stop.ts";
import { rollingUpdate } from "./scenarios/rolling_update.ts";
import { sigtermBacklog } from "./scenarios/sigterm_backlog.ts";
import { monitoring } from "./scenarios/monitoring.ts";
import { pausedLeader } from "./scenarios/paused_leader.ts";
import { protobufDecoding } from "./scenarios/protobuf_decoding.ts";
import { sandboxCheck } from "./scenarios/sandbox_check.ts";
import {
  buildGoAttacher,
  DEFAULT_VERSION as GO_ATTACHER_VERSION,
} from "../../bench/build_go_attacher.ts";

/** The driver's name: the mock driver's default. */
const DRIVER_NAME = "io.kubernetes.storage.mock";
const NODES = ["e2e-node-1", "e2e-node-2", "e2e-node-3", "e2e-node-4", "e2e-node-5"];

/** What the suite prepared before the scenarios (only what the selected ones need). */
interface Prepared {
  /** The Go csi-attacher binary (scenarios 17 and 19). */
  goAttacher?: string;
}

interface Scenario {
  id: number;
  name: string;
  run: (ctx: ScenarioContext, prepared: Prepared) => Promise<unknown>;
  /** It runs the Go csi-attacher: the suite builds it first (cached). */
  goAttacher?: true;
  /**
   * It runs no attacher against the cluster (only against the driver): alone, it leaves the
   * audit log without the attacher's requests, and the RBAC check has nothing to check.
   */
  noClusterAttacher?: true;
  /**
   * Its Pods need kube-controller-manager: the suite first checks that it works (a canary, see
   * `controller_canary.ts`), since it can lag for a minute after kube-apiserver restarts.
   */
  pods?: true;
}

const SCENARIOS: Scenario[] = [
  { id: 1, name: "attach and detach round trip", run: attachDetachRoundTrip },
  { id: 2, name: "PV deleted while attached keeps our finalizer", run: pvDeletedWhileAttached },
  {
    id: 3,
    name: "50 VolumeAttachments on 5 nodes at once",
    run: (ctx) => manyAttachments(ctx, 50),
  },
  {
    id: 4,
    name: "leader killed mid-run, the other replica finishes",
    run: (ctx) => leaderFailover(ctx),
  },
  { id: 5, name: "CSI driver restart: exit 1, restart, pending work done", run: driverRestart },
  { id: 6, name: "kube-apiserver restart: watches resume", run: (ctx) => apiserverRestart(ctx) },
  {
    id: 7,
    name: "bad objects get the Go attacher's attachError texts, then attach",
    run: badObjects,
  },
  {
    id: 8,
    name: "every connection goes silent: a new VA attaches within 45 s",
    run: silentConnections,
  },
  {
    id: 9,
    name: "kube-apiserver answers 429: retries absorb it, no attachError",
    run: (ctx) => throttledApiServer(ctx),
  },
  {
    id: 10,
    name: "a Pod's volume attaches, the Pod deleted, it detaches",
    run: podAttachDetach,
    pods: true,
  },
  {
    id: 11,
    name: "a Pod moves: Multi-Attach, detach, then attach elsewhere",
    run: podMovesNode,
    pods: true,
  },
  { id: 12, name: "20 Pods over 5 nodes at once", run: (ctx) => manyPods(ctx, 20), pods: true },
  {
    id: 13,
    name: "a Node deleted with its Pod and CSINode: detached",
    run: nodeDeleted,
    pods: true,
  },
  {
    id: 14,
    name: "attacher restarted while the controller keeps creating VAs",
    run: (ctx) => attacherRestartUnderLoad(ctx),
    pods: true,
  },
  {
    id: 15,
    name: "Pods the attacher must not be asked about; a node registered late",
    run: podBadInput,
    pods: true,
  },
  {
    id: 16,
    name: "the driver stops gracefully after 125 s idle: exit 1, no crash, next attach works",
    run: (ctx) => idleDriverStop(ctx),
  },
  {
    id: 17,
    name: `rolling update: Go csi-attacher ${GO_ATTACHER_VERSION} and ours hand the Lease over`,
    run: (ctx, prepared) =>
      rollingUpdate(ctx, { goAttacher: prepared.goAttacher!, goVersion: GO_ATTACHER_VERSION }),
    goAttacher: true,
  },
  {
    id: 18,
    name: "SIGTERM with 150 VAs pending at the default QPS: no publish after it, exit 0",
    run: async (ctx) => {
      await sigtermBacklog(ctx);
    },
  },
  {
    id: 19,
    name: "a leader paused 12 s then resumed calls the driver no more; a 2 s pause changes " +
      `nothing (and the Go csi-attacher ${GO_ATTACHER_VERSION}'s figures)`,
    run: (ctx, prepared) =>
      pausedLeader(ctx, { goAttacher: prepared.goAttacher!, goVersion: GO_ATTACHER_VERSION }),
    goAttacher: true,
  },
  {
    id: 21,
    name: "Prometheus scrapes the attacher: the stuck-attach alert fires and resolves, every " +
      "dashboard query has data",
    run: monitoring,
  },
  {
    id: 22,
    name:
      "our protobuf decoder on every VA, PV, CSINode and Lease of the cluster: the JSON form, " +
      "as protobufjs on the upstream .proto files reads them",
    run: protobufDecoding,
  },
  {
    id: 23,
    name: "csi-attacher sandbox check against the mock driver: every check that applies passes",
    run: sandboxCheck,
    noClusterAttacher: true,
  },
];

/** The release in the test's name; an unsupported `E2E_KUBERNETES` fails in the test itself. */
function releaseName(): string {
  try {
    return `Kubernetes ${kubernetesRelease(Deno.env.get("E2E_KUBERNETES")).version}`;
  } catch {
    return `Kubernetes ${Deno.env.get("E2E_KUBERNETES")}?`;
  }
}

Deno.test({
  name: `csi-attacher end-to-end (${releaseName()}: kube-apiserver, etcd, CSI mock driver)`,
  sanitizeOps: false,
  sanitizeResources: false,
  sanitizeExit: false,
}, async (t) => {
  const settings = await resolveSettings((name) => Deno.env.get(name));
  const log = (line: string) => console.log(`  ${line}`);
  const build = await ensureSettingsBinaries(settings, log);
  const prepared: Prepared = {};
  let goBuildSeconds: number | undefined;
  const wants = (s: Scenario) => settings.only === undefined || settings.only.has(s.id);
  if (SCENARIOS.some((s) => s.goAttacher && wants(s))) {
    const t0 = performance.now();
    prepared.goAttacher = await buildGoAttacher(GO_ATTACHER_VERSION, settings.cacheDir, {
      go: settings.go,
      jobs: settings.goJobs,
    });
    goBuildSeconds = (performance.now() - t0) / 1000;
  }
  const dir = await Deno.makeTempDir({ prefix: "csi-attacher-e2e-" });
  const rbac = settings.rbacManifest;
  log(`RBAC manifest: ${rbac.path}`);
  const cluster = await LocalCluster.start({
    dir,
    binaries: build.binaries,
    driverName: DRIVER_NAME,
    rbacManifest: rbac.text,
    log,
    // Processes run in their own sessions: an interrupted test runner would leave them behind.
    ownerPid: Deno.pid,
    controllerManager: true,
  });
  const times = [
    `build ${build.seconds.toFixed(1)} s${build.built ? "" : " (cached)"}`,
    ...(goBuildSeconds === undefined
      ? []
      : [`Go csi-attacher ${GO_ATTACHER_VERSION} ${goBuildSeconds.toFixed(1)} s`]),
    ...cluster.timings.map((x) => `${x.part} ${x.seconds.toFixed(1)} s`),
  ];
  let attacherEntry = settings.attacherEntry;
  if (attacherEntry === "bundle") {
    attacherEntry = `${dir}/bundle/main.js`;
    try {
      times.push(`attacher bundle ${(await bundleAttacher(`${dir}/bundle`)).toFixed(1)} s`);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }
  log(`start-up: ${times.join(", ")}`);
  let failed = false;
  try {
    for (const node of NODES) await cluster.addNode(node);
    await createCanaryNode(cluster.admin);
    let canaries = 0;
    for (const scenario of SCENARIOS) {
      const wanted = wants(scenario);
      const ok = await t.step({
        name: `${scenario.id}. ${scenario.name}`,
        ignore: !wanted,
        fn: async () => {
          if (scenario.pods) {
            const times = await runControllerCanary(cluster.admin, {
              seq: ++canaries,
              healthz: () => cluster.controllerManagerHealthz(),
              logPath: `${dir}/logs/kube-controller-manager.log`,
            });
            log(
              `kube-controller-manager works: canary PVC bound after ${
                times.bound.toFixed(1)
              } s, ` +
                `VA made ${times.vaCreated.toFixed(1)} s, attached ${
                  times.attached.toFixed(1)
                } s, ` +
                `detached ${times.detached.toFixed(1)} s`,
            );
          }
          const started = performance.now();
          const ctx = new ScenarioContext(cluster, {
            prefix: `s${scenario.id}`,
            nodes: NODES,
            attacherEntry,
            tolerate: settings.tolerate,
            kubernetes: settings.kubernetes,
          });
          try {
            await scenario.run(ctx, prepared);
          } finally {
            await ctx.close();
            log(`scenario ${scenario.id}: ${await ctx.repeatedCallsSummary()}`);
          }
          log(
            `scenario ${scenario.id} took ${((performance.now() - started) / 1000).toFixed(1)} s`,
          );
        },
      });
      // An ignored step also reports false.
      if (wanted && !ok) failed = true;
    }
    const rbacIgnored = SCENARIOS.filter(wants).every((s) => s.noClusterAttacher);
    const rbacOk = await t.step({
      name: "the RBAC manifest covers every request of the attacher",
      ignore: rbacIgnored,
      fn: () =>
        checkRbacSufficient(cluster, {
          allowForbidden: [/\/secrets\//],
          startWindows: cluster.apiserverStarts,
        }),
    });
    // An ignored step also reports false.
    if (!rbacIgnored && !rbacOk) failed = true;
    const reportOk = await t.step(
      settings.kubernetes === DEFAULT_KUBERNETES
        ? "the in-memory API server answers every probe as the real one"
        : `the in-memory API server (as ${DEFAULT_KUBERNETES.version}) against ` +
          `${settings.kubernetes.version}: the differences`,
      async () => {
        // Its PV binder would set the probe PV's status.phase, which is not the API server's doing.
        await cluster.stopControllerManager();
        const report = await compareWithMemoryApiServer(cluster.admin);
        await Deno.writeTextFile(`${dir}/api-differences.md`, report.markdown);
        log(
          `kube-apiserver ${report.serverVersion}: ${report.differences} of ${report.probes} ` +
            `probes answered differently by testkit/apiserver/server.ts; ` +
            `details in ${dir}/api-differences.md`,
        );
        for (const line of report.summary) console.log(`    ${line}`);
        if (settings.kubernetes !== DEFAULT_KUBERNETES) {
          // The in-memory server answers as the default release does; against another minor the
          // differences show what changed between the two, and fail nothing.
          log(
            `the in-memory API server answers as kube-apiserver ${DEFAULT_KUBERNETES.version}: ` +
              `differences from ${report.serverVersion} reported only`,
          );
          return;
        }
        if (report.differences > 0) {
          throw new Error(
            `testkit/apiserver/server.ts answers ${report.differences} probe(s) differently from ` +
              `kube-apiserver: ${report.summary.join("; ")}`,
          );
        }
      },
    );
    if (!reportOk) failed = true;
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    await cluster.stop();
    if (failed || settings.keep) log(`logs and state kept in ${dir}`);
    else await Deno.remove(dir, { recursive: true });
  }
});
