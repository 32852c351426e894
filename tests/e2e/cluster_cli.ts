/**
 * `deno task cluster`: starts the end-to-end suite's local cluster (etcd, kube-apiserver, the CSI
 * mock driver) and leaves it running; prints the kubeconfig paths and the driver socket.
 * `deno task cluster -- --stop` stops it; `deno task cluster -- --compare` sends the probes of
 * {@link compareWithMemoryApiServer} to the running cluster and to a fresh in-memory API server
 * and writes the differences to `<cache dir>/cluster/api-differences.md`. The cluster lives in
 * `<cache dir>/cluster`.
 *
 * @module
 */

import { compareWithMemoryApiServer } from "./api_differences.ts";
import { ensureBinaries, KUBERNETES_VERSION } from "./binaries.ts";
import { type ClusterInfo, LocalCluster, stopSavedCluster } from "./cluster.ts";
import { csiNode, PATHS } from "./objects.ts";
import { groupAlive } from "./process.ts";
import { RawApi } from "./raw_api.ts";
import { resolveSettings } from "./settings.ts";

const DRIVER_NAME = "io.kubernetes.storage.mock";
const NODES = ["node-1", "node-2", "node-3"];

async function readInfo(path: string): Promise<ClusterInfo | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(path)) as ClusterInfo;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

function running(info: ClusterInfo): boolean {
  return [info.pids.etcd, info.pids.apiserver, info.pids.driver].some((p) =>
    p > 0 && groupAlive(p)
  );
}

async function main(args: string[]): Promise<number> {
  const settings = await resolveSettings((name) => Deno.env.get(name));
  const dir = `${settings.cacheDir}/cluster`;
  const infoFile = `${dir}/cluster.json`;
  const previous = await readInfo(infoFile);
  if (args.includes("--stop")) {
    if (previous === undefined || !running(previous)) {
      console.log("no cluster is running");
    } else {
      await stopSavedCluster(previous);
      console.log(`stopped the cluster in ${dir}`);
    }
    return 0;
  }
  if (args.includes("--compare")) {
    if (previous === undefined || !running(previous)) {
      console.error("no cluster is running; start it with deno task cluster");
      return 1;
    }
    return await compare(previous);
  }
  if (args.length > 0) {
    console.error("usage: deno task cluster [-- --stop | --compare]");
    return 2;
  }
  if (previous !== undefined && running(previous)) {
    console.error(`a cluster is already running (${previous.server}); stop it with --stop`);
    return 1;
  }
  await Deno.remove(dir, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  const log = (line: string) => console.log(line);
  const build = await ensureBinaries({
    cacheDir: settings.cacheDir,
    go: settings.go,
    jobs: settings.goJobs,
    log,
  });
  const cluster = await LocalCluster.start({
    dir,
    binaries: build.binaries,
    driverName: DRIVER_NAME,
    rbacManifest: settings.rbacManifest.text,
    log,
  });
  try {
    for (const node of NODES) {
      await cluster.admin.createOk(PATHS.csiNodes, csiNode(node, DRIVER_NAME, DRIVER_NAME));
    }
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  const times = [
    `build ${build.seconds.toFixed(1)} s${build.built ? "" : " (cached)"}`,
    ...cluster.timings.map((x) => `${x.part} ${x.seconds.toFixed(1)} s`),
  ];
  const info = cluster.info;
  console.log([
    "",
    `kube-apiserver ${KUBERNETES_VERSION} at ${info.server} (${times.join(", ")})`,
    `admin kubeconfig:    ${info.adminKubeconfig}`,
    `attacher kubeconfig: ${info.attacherKubeconfig} (RBAC: ${settings.rbacManifest.path})`,
    `CSI driver socket:   ${info.driverSocket} (driver ${info.driverName}, node ID ${info.driverName})`,
    `CSINodes:            ${NODES.join(", ")}`,
    `logs:                ${dir}/logs`,
    "",
    "run the attacher:",
    `  deno run -A main.ts --kubeconfig=${info.attacherKubeconfig} --csi-address=${info.driverSocket} --v=5`,
    "stop:",
    "  deno task cluster -- --stop",
  ].join("\n"));
  cluster.detach();
  return 0;
}

/** The admin's client of a running cluster, from the certificates the cluster made. */
async function adminApi(info: ClusterInfo): Promise<RawApi> {
  const certs = `${info.dir}/certs`;
  return new RawApi({
    server: info.server,
    caCert: await Deno.readTextFile(`${certs}/ca.crt`),
    clientCert: await Deno.readTextFile(`${certs}/client-admin.crt`),
    clientKey: await Deno.readTextFile(`${certs}/client-admin.key`),
  });
}

async function compare(info: ClusterInfo): Promise<number> {
  const report = await compareWithMemoryApiServer(await adminApi(info));
  const file = `${info.dir}/api-differences.md`;
  await Deno.writeTextFile(file, report.markdown);
  console.log(`${report.differences} probes differ (details in ${file})`);
  for (const line of report.summary) console.log(`  - ${line}`);
  return 0;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args.filter((a) => a !== "--")));
}
