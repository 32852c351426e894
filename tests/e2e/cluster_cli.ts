/**
 * `deno task cluster`: starts the end-to-end suite's local cluster (etcd, kube-apiserver,
 * kube-controller-manager, the CSI mock driver, Nodes `node-1`… with their CSINodes) and leaves
 * it running; prints the kubeconfig paths, the driver socket and the kubectl built with them.
 * `deno task cluster -- --stop` stops it; `deno task cluster -- --compare` sends the probes of
 * {@link compareWithMemoryApiServer} to the running cluster and to a fresh in-memory API server
 * and writes the differences to `<cache dir>/cluster/api-differences.md`. The cluster lives in
 * `<cache dir>/cluster`.
 *
 * @module
 */

import { compareWithMemoryApiServer } from "./api_differences.ts";
import { type ClusterInfo, CONTROLLERS, LocalCluster, stopSavedCluster } from "./cluster.ts";
import { run } from "./exec.ts";
import { groupAlive } from "./process.ts";
import { RawApi } from "./raw_api.ts";
import { ensureSettingsBinaries, resolveSettings } from "./settings.ts";

const DRIVER_NAME = "io.kubernetes.storage.mock";
const NODES = ["node-1", "node-2", "node-3"];

/**
 * The walkthrough's objects (README): a PV for the driver volume `volumeHandle`, a PVC bound to
 * it, and a Pod on node-1 that mounts it.
 */
export function exampleManifest(driver: string, volumeHandle: string): string {
  return `apiVersion: v1
kind: PersistentVolume
metadata:
  name: example-pv
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: ${driver}, volumeHandle: "${volumeHandle}", fsType: ext4}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: example-pvc
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  storageClassName: ""
  volumeName: example-pv
---
apiVersion: v1
kind: Pod
metadata:
  name: example
spec:
  nodeName: node-1   # no scheduler and no kubelet: bound by hand, stays Pending
  containers:
    - name: app
      image: registry.k8s.io/pause:3.10
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: example-pvc}
`;
}

async function readInfo(path: string): Promise<ClusterInfo | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(path)) as ClusterInfo;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

function running(info: ClusterInfo): boolean {
  const pids = info.pids;
  return [pids.etcd, pids.apiserver, pids.controllerManager ?? 0, pids.driver].some((p) =>
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
  const build = await ensureSettingsBinaries(settings, log, true);
  const cluster = await LocalCluster.start({
    dir,
    binaries: build.binaries,
    driverName: DRIVER_NAME,
    rbacManifest: settings.rbacManifest.text,
    log,
    controllerManager: true,
  });
  const example = `${dir}/example.yaml`;
  try {
    for (const node of NODES) await cluster.addNode(node);
    const volumeHandle = await cluster.driver().createVolume("example");
    await Deno.writeTextFile(example, exampleManifest(DRIVER_NAME, volumeHandle));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  const times = [
    `build ${build.seconds.toFixed(1)} s${build.built ? "" : " (cached)"}`,
    ...cluster.timings.map((x) => `${x.part} ${x.seconds.toFixed(1)} s`),
  ];
  const info = cluster.info;
  const kubectl = build.binaries.kubectl!;
  const version = await run(kubectl, ["version", `--kubeconfig=${info.adminKubeconfig}`]);
  console.log([
    "",
    `kube-apiserver ${build.release.version} at ${info.server} (${times.join(", ")})`,
    `kube-controller-manager: ${CONTROLLERS.join(", ")}`,
    `admin kubeconfig:    ${info.adminKubeconfig}`,
    `attacher kubeconfig: ${info.attacherKubeconfig} (ServiceAccount token; RBAC: ${settings.rbacManifest.path})`,
    `  with a certificate: ${info.attacherCertKubeconfig} (the same user)`,
    `CSI driver socket:   ${info.driverSocket} (driver ${info.driverName}, node ID ${info.driverName})`,
    `Nodes and CSINodes:  ${
      NODES.join(", ")
    } (no kubelet: Pods set spec.nodeName and stay Pending)`,
    `kubectl:             ${kubectl}`,
    `kubectl version:     ${(version.stdout + version.stderr).trim().split("\n").join("; ")}`,
    `logs:                ${dir}/logs`,
    "",
    "use kubectl as the administrator:",
    `  export KUBECONFIG=${info.adminKubeconfig}`,
    `  alias kubectl=${kubectl}`,
    "run the attacher:",
    `  deno task dev -- --kubeconfig=${info.attacherKubeconfig} --csi-address=${info.driverSocket} --v=5`,
    "a PV (of a volume made in the driver), a PVC and a Pod on node-1 that uses it:",
    `  kubectl apply -f ${example}`,
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
  console.log(
    `kube-apiserver ${report.serverVersion}: ${report.differences} of ${report.probes} probes ` +
      `differ (details in ${file})`,
  );
  for (const line of report.summary) console.log(`  - ${line}`);
  return 0;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args.filter((a) => a !== "--")));
}
