/**
 * A local cluster on loopback for the end-to-end suite: etcd, a real kube-apiserver with client
 * certificate and ServiceAccount token authentication and RBAC, optionally a real
 * kube-controller-manager running the attach/detach controller (so Pods make VolumeAttachments, as
 * in a cluster), and a real CSI driver (the Kubernetes e2e CSI mock driver) on a unix socket.
 * Everything runs as child processes in their own process groups, with logs and state under one
 * working directory; {@link LocalCluster.stop} stops all of it.
 *
 * @module
 */

import type { Binaries } from "./binaries.ts";
import {
  type ClusterCertificates,
  kubeconfigFor,
  makeCertificates,
  tokenKubeconfig,
  VALID_DAYS,
} from "./certs.ts";
import { DriverClient } from "./driver_client.ts";
import { type DriverCall, parseDriverCalls } from "./driver_log.ts";
import { applyManifest } from "./manifests.ts";
import { csiNode, node, PATHS } from "./objects.ts";
import { ManagedProcess, stopGroup } from "./process.ts";
import { RawApi } from "./raw_api.ts";

/** The attacher's ServiceAccount (the RBAC manifest's), as `[namespace, name]`. */
export const ATTACHER_SERVICE_ACCOUNT = ["default", "csi-attacher"] as const;
/**
 * The user the attacher authenticates as: its ServiceAccount's (kubernetes
 * staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go, `MakeUsername`).
 */
export const ATTACHER_USER = "system:serviceaccount:default:csi-attacher";
/** The namespace of the chaos run's replica ServiceAccounts (`csi-attacher-<replica>`). */
export const REPLICA_NAMESPACE = "csi-attacher-e2e-replicas";
/**
 * The group of the chaos run's replica users (see {@link LocalCluster.replicaKubeconfig}): each
 * replica its own ServiceAccount in {@link REPLICA_NAMESPACE}, so the audit log names the replica
 * behind every request; a ServiceAccount's token carries the group of its namespace
 * (`MakeNamespaceGroupName`), the audit policy selects it as it selects {@link ATTACHER_USER},
 * and the chaos run binds it to the attacher's roles.
 */
export const REPLICA_GROUP = `system:serviceaccounts:${REPLICA_NAMESPACE}`;
/** The ServiceAccount of a chaos replica, in {@link REPLICA_NAMESPACE}. */
export function replicaServiceAccount(replica: string): string {
  return `csi-attacher-${replica}`;
}
/** The user name of a replica's ServiceAccount token. */
export function replicaUser(replica: string): string {
  return `system:serviceaccount:${REPLICA_NAMESPACE}:${replicaServiceAccount(replica)}`;
}
/**
 * How long the ServiceAccount tokens the cluster asks for are valid: as long as its certificates.
 * kube-apiserver grants it as asked: it shortens a TokenRequest only to
 * `--service-account-max-token-expiration`, unset here (kubernetes
 * pkg/registry/core/serviceaccount/storage/token.go, `Create`).
 */
export const TOKEN_SECONDS = VALID_DAYS * 24 * 3600;
/** The suite's administrator (member of `system:masters`). */
export const ADMIN_USER = "csi-attacher-e2e-admin";
/**
 * kube-controller-manager's own user: kube-apiserver's bootstrap RBAC binds it to the
 * `system:kube-controller-manager` ClusterRole (kubernetes
 * plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
 */
export const CONTROLLER_MANAGER_USER = "system:kube-controller-manager";

/**
 * The controllers kube-controller-manager runs (canonical names of kubernetes
 * cmd/kube-controller-manager/names/controller_names.go): attach/detach makes the
 * VolumeAttachments of scheduled Pods, the binder binds PVCs, the garbage collector deletes a
 * deleted Node's CSINode (its owner), pod GC deletes the Pods of deleted Nodes, and the service
 * account controller makes the `default` ServiceAccount that admission requires for every Pod.
 */
export const CONTROLLERS = [
  "persistentvolume-attach-detach-controller",
  "persistentvolume-binder-controller",
  "garbage-collector-controller",
  "pod-garbage-collector-controller",
  "serviceaccount-controller",
] as const;

/** What a running cluster is, in a form that can be saved and read back (`cluster.json`). */
export interface ClusterInfo {
  dir: string;
  /** `https://127.0.0.1:<port>`. */
  server: string;
  adminKubeconfig: string;
  /**
   * Kubeconfig of {@link ATTACHER_USER} with its ServiceAccount's token, as in a Pod (valid
   * {@link TOKEN_SECONDS}).
   */
  attacherKubeconfig: string;
  /**
   * The same user with a client certificate (CN {@link ATTACHER_USER}, the ServiceAccount's groups
   * as O), for whoever wants one credential that no API call made.
   */
  attacherCertKubeconfig: string;
  /** Kubeconfig of {@link CONTROLLER_MANAGER_USER}; "" when kube-controller-manager does not run. */
  controllerManagerKubeconfig: string;
  driverName: string;
  /** Unix socket path of the CSI driver. */
  driverSocket: string;
  /** The driver's call log. */
  driverLog: string;
  /**
   * The API server's audit log (requests of {@link ATTACHER_USER} and {@link REPLICA_GROUP} only;
   * their writes of Leases and VolumeAttachments with request and response bodies, see
   * {@link AUDIT_POLICY}).
   */
  auditLog: string;
  /** Process group ids (0: not running). */
  pids: { etcd: number; apiserver: number; controllerManager: number; driver: number };
}

/** Options of {@link LocalCluster.start}. */
export interface ClusterOptions {
  /** Working directory; created when missing. */
  dir: string;
  binaries: Binaries;
  /** The CSI driver's name (also its only node ID). */
  driverName: string;
  /** RBAC manifest (YAML) that grants {@link ATTACHER_USER} its rights. */
  rbacManifest: string;
  /** Progress lines. */
  log: (line: string) => void;
  /** Kill every process of the cluster once this process is gone (see `ProcessSpec.ownerPid`). */
  ownerPid?: number;
  /** Also run kube-controller-manager with {@link CONTROLLERS}. */
  controllerManager?: boolean;
  /** Extra flags of the CSI mock driver (`tools/mockdriver`), e.g. `--abort-busy-volumes`. */
  driverArgs?: readonly string[];
  /**
   * Whether the driver keeps its volumes and publications in a state file across its restarts
   * (default true: the chaos and restart scenarios need it). The driver rewrites the whole file on
   * every publish and unpublish, which costs time in proportion to its volumes: at 20 000 it held
   * a run to 16 attaches a second, so the benchmark, which never restarts the driver, goes without.
   */
  driverStateFile?: boolean;
}

/** The command-line flags of the CSI mock driver of a cluster in `dir` (`tools/mockdriver`). */
export function mockDriverFlags(
  dir: string,
  info: { driverSocket: string; driverName: string },
  options: Pick<ClusterOptions, "driverArgs" | "driverStateFile">,
): string[] {
  return [
    `--endpoint=${info.driverSocket}`,
    `--name=${info.driverName}`,
    ...(options.driverStateFile === false ? [] : [`--state-file=${dir}/csi/driver-state.json`]),
    `--fault-file=${dir}/csi/driver-fault.json`,
    ...(options.driverArgs ?? []),
    "--v=3",
  ];
}

/**
 * A fault of the driver's ControllerPublishVolume and ControllerUnpublishVolume calls, as the mock
 * driver reads it (`tools/mockdriver`, `fault`): `hang` holds each call until the fault ends (or
 * its caller gives up), `fail` answers `code` at once, `slow` serves each call `delayMs` late.
 */
export interface DriverFault {
  mode: "hang" | "fail" | "slow";
  /** When the fault ends (ms since the epoch). */
  untilMs: number;
  /** gRPC code name for `fail`, e.g. `Unavailable`. */
  code?: string;
  delayMs?: number;
  /** Only these full method names (default both). */
  methods?: string[];
}

/** How long one part took. */
export interface Timing {
  part: string;
  seconds: number;
}

/** One audit record of the attacher's requests. */
export interface AuditEvent {
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
  responseStatus?: { code?: number; message?: string };
  stage: string;
  /** RFC 3339 with microseconds. */
  requestReceivedTimestamp?: string;
  /** When the stage was reached (RFC 3339 with microseconds): for ResponseComplete, the answer. */
  stageTimestamp?: string;
  /** The object the API server answered with (writes of Leases and VolumeAttachments only). */
  responseObject?: unknown;
}

/**
 * The audit policy: every request of the attacher's user and of {@link REPLICA_GROUP}'s users
 * (each its own rules: a rule's `users` and `userGroups` must both match, k8s.io/apiserver
 * pkg/audit/policy/checker.go, `ruleMatches`), with the bodies of their Lease and VolumeAttachment
 * writes (the Lease holder as the server stored it, the finalizers a
 * VolumeAttachment had after each write: what `paused_leader.ts` and the cluster chaos check).
 * Status writes are subresources (`volumeattachments/status`) and stay at Metadata.
 */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    users: ["${ATTACHER_USER}"]
    verbs: ["create", "update", "patch"]
    resources:
      - group: coordination.k8s.io
        resources: ["leases"]
      - group: storage.k8s.io
        resources: ["volumeattachments"]
  - level: RequestResponse
    userGroups: ["${REPLICA_GROUP}"]
    verbs: ["create", "update", "patch"]
    resources:
      - group: coordination.k8s.io
        resources: ["leases"]
      - group: storage.k8s.io
        resources: ["volumeattachments"]
  - level: Metadata
    users: ["${ATTACHER_USER}"]
  - level: Metadata
    userGroups: ["${REPLICA_GROUP}"]
  - level: None
`;

/** A free TCP port on 127.0.0.1 (bound, then released). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns true; fails early when `process` exits. */
async function waitFor(
  what: string,
  process: ManagedProcess | undefined,
  timeoutMs: number,
  probe: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (process?.exitStatus !== undefined) {
      throw new Error(
        `${process.spec.name} exited (${JSON.stringify(process.exitStatus)}) before ${what}:\n` +
          await process.tail(),
      );
    }
    try {
      if (await probe()) return;
    } catch (err) {
      lastError = err;
    }
    await sleep(100);
  }
  const tail = process === undefined ? "" : `\n${await process.tail()}`;
  throw new Error(`timed out waiting for ${what}${tail}`, { cause: lastError });
}

/**
 * The running cluster. {@link LocalCluster.start} starts it; {@link LocalCluster.stop} stops
 * every process (also after a failed start).
 */
export class LocalCluster {
  readonly info: ClusterInfo;
  /** Administrator access (a plain `fetch` client, independent of the attacher's client). */
  readonly admin: RawApi;
  /** Time taken by each part of the start. */
  readonly timings: Timing[] = [];
  /**
   * Each kube-apiserver start: from the spawn to the first `/readyz` 200 (ms since the epoch).
   * Until its RBAC caches have synced a starting server refuses requests with 403.
   */
  readonly apiserverStarts: { startedAt: number; readyAt: number }[] = [];
  readonly #binaries: Binaries;
  readonly #driverOptions: Pick<ClusterOptions, "driverArgs" | "driverStateFile">;
  readonly #log: (line: string) => void;
  /** The owner given in the options: processes die with it. */
  readonly ownerPid: number | undefined;
  readonly #processes: {
    etcd?: ManagedProcess;
    apiserver?: ManagedProcess;
    controllerManager?: ManagedProcess;
    driver?: ManagedProcess;
  } = {};
  #driverClient: DriverClient | undefined;

  private constructor(info: ClusterInfo, admin: RawApi, options: ClusterOptions) {
    this.info = info;
    this.admin = admin;
    this.#binaries = options.binaries;
    this.#driverOptions = {
      driverArgs: options.driverArgs,
      driverStateFile: options.driverStateFile,
    };
    this.#log = options.log;
    this.ownerPid = options.ownerPid;
  }

  /**
   * Makes certificates, starts etcd and kube-apiserver, waits for `/readyz`, applies the RBAC
   * manifest, writes the attacher's kubeconfig with its ServiceAccount's token and starts the CSI
   * driver. On failure everything started so far is stopped.
   */
  static async start(options: ClusterOptions): Promise<LocalCluster> {
    const dir = options.dir;
    for (const sub of ["certs", "logs", "csi"]) {
      await Deno.mkdir(`${dir}/${sub}`, { recursive: true });
    }
    const timed = async <T>(part: string, fn: () => Promise<T>, into: Timing[]): Promise<T> => {
      const t0 = performance.now();
      const result = await fn();
      into.push({ part, seconds: (performance.now() - t0) / 1000 });
      return result;
    };
    const timings: Timing[] = [];
    const certs: ClusterCertificates = await timed(
      "certificates",
      () =>
        makeCertificates(`${dir}/certs`, [
          { id: "admin", user: ADMIN_USER, groups: ["system:masters"] },
          {
            id: "attacher",
            user: ATTACHER_USER,
            groups: ["system:serviceaccounts", "system:serviceaccounts:default"],
          },
          { id: "controller-manager", user: CONTROLLER_MANAGER_USER, groups: [] },
        ]),
      timings,
    );
    const apiPort = freePort();
    const server = `https://127.0.0.1:${apiPort}`;
    const info: ClusterInfo = {
      dir,
      server,
      adminKubeconfig: `${dir}/admin.kubeconfig`,
      attacherKubeconfig: `${dir}/attacher.kubeconfig`,
      attacherCertKubeconfig: `${dir}/attacher-cert.kubeconfig`,
      controllerManagerKubeconfig: "",
      driverName: options.driverName,
      driverSocket: `${dir}/csi/csi.sock`,
      driverLog: `${dir}/logs/driver.log`,
      auditLog: `${dir}/logs/audit.log`,
      pids: { etcd: 0, apiserver: 0, controllerManager: 0, driver: 0 },
    };
    await Deno.writeTextFile(
      info.adminKubeconfig,
      await kubeconfigFor(server, certs.ca.cert, certs.clients.admin!, ADMIN_USER),
    );
    await Deno.writeTextFile(
      info.attacherCertKubeconfig,
      await kubeconfigFor(server, certs.ca.cert, certs.clients.attacher!, ATTACHER_USER),
    );
    if (options.controllerManager) {
      info.controllerManagerKubeconfig = `${dir}/controller-manager.kubeconfig`;
      await Deno.writeTextFile(
        info.controllerManagerKubeconfig,
        await kubeconfigFor(
          server,
          certs.ca.cert,
          certs.clients["controller-manager"]!,
          CONTROLLER_MANAGER_USER,
        ),
      );
    }
    const admin = new RawApi({
      server,
      caCert: await Deno.readTextFile(certs.ca.cert),
      clientCert: await Deno.readTextFile(certs.clients.admin!.cert),
      clientKey: await Deno.readTextFile(certs.clients.admin!.key),
    });
    const cluster = new LocalCluster(info, admin, options);
    cluster.timings.push(...timings);
    try {
      await timed("etcd", () => cluster.#startEtcd(), cluster.timings);
      await Deno.writeTextFile(`${dir}/audit-policy.yaml`, AUDIT_POLICY);
      await timed("kube-apiserver", () => cluster.#startApiServer(certs, apiPort), cluster.timings);
      await timed("RBAC", async () => {
        const applied = await applyManifest(admin, options.rbacManifest);
        options.log(`applied ${applied.join(", ")}`);
      }, cluster.timings);
      await timed("ServiceAccount token", async () => {
        const token = await cluster.serviceAccountToken(...ATTACHER_SERVICE_ACCOUNT);
        await Deno.writeTextFile(
          info.attacherKubeconfig,
          await tokenKubeconfig(server, certs.ca.cert, token, ATTACHER_USER),
        );
      }, cluster.timings);
      if (options.controllerManager) {
        await timed(
          "kube-controller-manager",
          () => cluster.#startControllerManager(certs),
          cluster.timings,
        );
      }
      await timed("CSI driver", () => cluster.startDriver(), cluster.timings);
      await cluster.saveInfo();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  #etcdPorts: { client: number; peer: number } | undefined;

  async #startEtcd(): Promise<void> {
    this.#etcdPorts ??= { client: freePort(), peer: freePort() };
    const { client: clientPort, peer: peerPort } = this.#etcdPorts;
    const etcd = ManagedProcess.start({
      name: "etcd",
      cmd: this.#binaries.etcd,
      args: [
        "--name=e2e",
        `--data-dir=${this.info.dir}/etcd-data`,
        `--listen-client-urls=http://127.0.0.1:${clientPort}`,
        `--advertise-client-urls=http://127.0.0.1:${clientPort}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=e2e=http://127.0.0.1:${peerPort}`,
        "--unsafe-no-fsync",
        "--log-level=warn",
      ],
      logFile: `${this.info.dir}/logs/etcd.log`,
      ownerPid: this.ownerPid,
    });
    this.#processes.etcd = etcd;
    this.info.pids.etcd = etcd.pid;
    this.#etcdUrl = `http://127.0.0.1:${clientPort}`;
    await waitFor("etcd /health", etcd, 30_000, async () => {
      const res = await fetch(`${this.#etcdUrl}/health`);
      const body = await res.json() as { health?: string };
      return body.health === "true";
    });
  }

  #etcdUrl = "";
  #apiserverArgs: string[] = [];

  async #startApiServer(certs: ClusterCertificates, port: number): Promise<void> {
    const dir = this.info.dir;
    this.#apiserverArgs = [
      `--etcd-servers=${this.#etcdUrl}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      `--secure-port=${port}`,
      `--cert-dir=${dir}/certs/apiserver-generated`,
      `--tls-cert-file=${certs.server.cert}`,
      `--tls-private-key-file=${certs.server.key}`,
      `--client-ca-file=${certs.ca.cert}`,
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${certs.serviceAccountPublicKey}`,
      `--service-account-signing-key-file=${certs.serviceAccountKey}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--authorization-mode=RBAC",
      // kube-controller-manager runs without the pv- and pvc-protection controllers: the
      // finalizers this plugin adds would never be removed, so PVs could not go away.
      "--disable-admission-plugins=StorageObjectInUseProtection",
      // The "kubernetes" Service endpoints cannot be 127.0.0.1.
      "--endpoint-reconciler-type=none",
      `--audit-policy-file=${dir}/audit-policy.yaml`,
      `--audit-log-path=${this.info.auditLog}`,
      "--audit-log-format=json",
      "--profiling=false",
      "--v=1",
    ];
    await this.#runApiServer();
  }

  async #runApiServer(extraArgs: readonly string[] = []): Promise<void> {
    const apiserver = ManagedProcess.start({
      name: "kube-apiserver",
      cmd: this.#binaries.kubeApiserver,
      args: [...this.#apiserverArgs, ...extraArgs],
      logFile: `${this.info.dir}/logs/kube-apiserver.log`,
      ownerPid: this.ownerPid,
    });
    this.#processes.apiserver = apiserver;
    this.info.pids.apiserver = apiserver.pid;
    const startedAt = Date.now();
    await waitFor("kube-apiserver /readyz", apiserver, 120_000, async () => {
      const res = await this.admin.request("GET", "/readyz");
      return res.status === 200;
    });
    this.apiserverStarts.push({ startedAt, readyAt: Date.now() });
  }

  /**
   * Starts kube-controller-manager as {@link CONTROLLER_MANAGER_USER} with {@link CONTROLLERS};
   * each controller acts with its own service account's token (as kubeadm sets it up), so the
   * bootstrap roles `system:controller:<name>` apply. Serves `/healthz` on loopback with the
   * API server's certificate; resolves once that answers `ok`.
   */
  async #startControllerManager(certs: ClusterCertificates): Promise<void> {
    const port = freePort();
    const process = ManagedProcess.start({
      name: "kube-controller-manager",
      cmd: this.#binaries.kubeControllerManager,
      args: [
        `--kubeconfig=${this.info.controllerManagerKubeconfig}`,
        `--controllers=${CONTROLLERS.join(",")}`,
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        // The binder retries a PVC whose PV it has not seen yet at this period (default 15 s).
        "--pvclaimbinder-sync-period=2s",
        "--bind-address=127.0.0.1",
        `--secure-port=${port}`,
        `--tls-cert-file=${certs.server.cert}`,
        `--tls-private-key-file=${certs.server.key}`,
        // No front proxy or webhook token authentication: /healthz is always allowed.
        "--authentication-skip-lookup",
        "--profiling=false",
        "--v=2",
        // Its informers' "Watch failed - backing off" lines: after kube-apiserver restarts they
        // explain why the controllers do not react for a while (see controller_canary.ts).
        "--vmodule=reflector=4",
      ],
      logFile: `${this.info.dir}/logs/kube-controller-manager.log`,
      ownerPid: this.ownerPid,
    });
    this.#processes.controllerManager = process;
    this.info.pids.controllerManager = process.pid;
    this.#controllerManagerHealthz = {
      url: `https://127.0.0.1:${port}/healthz`,
      caCert: await Deno.readTextFile(certs.ca.cert),
    };
    await waitFor(
      "kube-controller-manager /healthz",
      process,
      60_000,
      async () => (await this.controllerManagerHealthz()) === "ok",
    );
  }

  #controllerManagerHealthz: { url: string; caCert: string } | undefined;

  /**
   * The body of kube-controller-manager's `/healthz` (`ok` when healthy). It says nothing about
   * its informers: see `controller_canary.ts`.
   *
   * @throws {Error} when kube-controller-manager was not started or has exited, or does not answer.
   */
  async controllerManagerHealthz(): Promise<string> {
    const process = this.#processes.controllerManager;
    const target = this.#controllerManagerHealthz;
    if (process === undefined || target === undefined) {
      throw new Error("kube-controller-manager was not started");
    }
    if (process.exitStatus !== undefined) {
      throw new Error(
        `kube-controller-manager exited (${JSON.stringify(process.exitStatus)}):\n` +
          await process.tail(),
      );
    }
    const client = Deno.createHttpClient({ caCerts: [target.caCert] });
    try {
      const res = await fetch(target.url, { client, signal: AbortSignal.timeout(5000) });
      return await res.text();
    } finally {
      client.close();
    }
  }

  /** Stops kube-controller-manager (when it runs); the rest of the cluster keeps running. */
  async stopControllerManager(): Promise<void> {
    await this.#processes.controllerManager?.stop(10_000);
    this.info.pids.controllerManager = 0;
  }

  /**
   * Stops kube-apiserver (SIGTERM; SIGKILL after 5 s: it stops listening at once but its process
   * can linger for a long time) and starts it again on the same port and etcd; resolves once
   * `/readyz` answers 200 again. `downMs` keeps it down that long in between; `extraArgs` are
   * added to its usual flags for this run only (the next restart drops them).
   */
  async restartApiServer(downMs = 0, extraArgs: readonly string[] = []): Promise<void> {
    await this.#processes.apiserver?.stop(5_000);
    if (downMs > 0) await sleep(downMs);
    await this.#runApiServer(extraArgs);
    await this.saveInfo();
  }

  /**
   * Stops etcd (SIGTERM) and starts it again on the same ports and data; resolves once it is
   * healthy again. kube-apiserver keeps running and reconnects by itself. `downMs` keeps etcd down
   * that long in between.
   */
  async restartEtcd(downMs = 0): Promise<void> {
    await this.#processes.etcd?.stop(5_000);
    if (downMs > 0) await sleep(downMs);
    await this.#startEtcd();
    await this.saveInfo();
  }

  /**
   * The fault the driver's acting calls meet from now on (the mock driver's `--fault-file`,
   * `tools/mockdriver`); `undefined` ends it. It ends by itself at `untilMs`.
   */
  async setDriverFault(fault: DriverFault | undefined): Promise<void> {
    const path = `${this.info.dir}/csi/driver-fault.json`;
    const tmp = `${path}.tmp`;
    await Deno.writeTextFile(tmp, JSON.stringify(fault ?? { mode: "none", untilMs: 0 }));
    await Deno.rename(tmp, path);
  }

  /** Starts the CSI driver and waits until it answers ListVolumes. */
  async startDriver(): Promise<void> {
    const driver = ManagedProcess.start({
      name: "csi-driver",
      cmd: this.#binaries.mockDriver,
      args: mockDriverFlags(this.info.dir, this.info, this.#driverOptions),
      logFile: this.info.driverLog,
      ownerPid: this.ownerPid,
    });
    this.#processes.driver = driver;
    this.info.pids.driver = driver.pid;
    this.#driverClient?.close();
    this.#driverClient = undefined;
    await waitFor("the CSI driver socket", driver, 30_000, async () => {
      await this.driver().listVolumes(1000);
      return true;
    });
  }

  /** Stops the CSI driver (SIGTERM); `kill` sends SIGKILL at once. */
  async stopDriver(kill = false): Promise<void> {
    this.#driverClient?.close();
    this.#driverClient = undefined;
    const driver = this.#processes.driver;
    if (driver === undefined) return;
    if (kill) driver.kill("SIGKILL");
    await driver.stop(5000);
  }

  /**
   * Registers Node `name` as a kubelet would for controller-managed attach/detach (no kubelet
   * runs) and its CSINode listing the driver (node ID: the driver's name, the only one the mock
   * driver accepts), owned by the Node so that it goes with it.
   */
  async addNode(name: string): Promise<void> {
    const created = await this.admin.createOk<{ metadata: { uid: string } }>(
      PATHS.nodes,
      node(name),
    );
    const driver = this.info.driverName;
    await this.admin.createOk(PATHS.csiNodes, csiNode(name, driver, driver, created.metadata.uid));
  }

  /** The suite's gRPC client for the driver (CreateVolume, ListVolumes). */
  driver(): DriverClient {
    this.#driverClient ??= new DriverClient(this.info.driverSocket);
    return this.#driverClient;
  }

  /**
   * A bearer token of the ServiceAccount `namespace/name` from the TokenRequest API
   * (`POST .../serviceaccounts/<name>/token`), valid {@link TOKEN_SECONDS}; the namespace and the
   * ServiceAccount are made first when missing. kube-apiserver signs it with
   * `--service-account-signing-key-file` and verifies it with `--service-account-key-file`, the
   * same files at every start, and checks that the ServiceAccount (its UID) still exists (in
   * etcd), so the token outlives restarts of both.
   *
   * @throws {Error} when kube-apiserver grants a shorter token.
   */
  async serviceAccountToken(namespace: string, name: string): Promise<string> {
    if (await this.admin.find(`/api/v1/namespaces/${namespace}`) === undefined) {
      await this.admin.createOk("/api/v1/namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: namespace },
      });
    }
    const accounts = `/api/v1/namespaces/${namespace}/serviceaccounts`;
    if (await this.admin.find(`${accounts}/${name}`) === undefined) {
      await this.admin.createOk(accounts, {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name, namespace },
      });
    }
    const asked = Date.now();
    const answer = await this.admin.createOk<
      { status?: { token?: string; expirationTimestamp?: string } }
    >(`${accounts}/${name}/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: TOKEN_SECONDS },
    });
    const token = answer.status?.token ?? "";
    const expires = Date.parse(answer.status?.expirationTimestamp ?? "");
    // The timestamp has whole seconds: a minute of slack.
    if (token === "" || !(expires >= asked + TOKEN_SECONDS * 1000 - 60_000)) {
      throw new Error(
        `the token of ServiceAccount ${namespace}/${name} expires at ` +
          `${answer.status?.expirationTimestamp}, not in ${TOKEN_SECONDS} s`,
      );
    }
    return token;
  }

  /**
   * A kubeconfig of `replica`'s own user ({@link replicaUser}, in {@link REPLICA_GROUP}) with its
   * ServiceAccount's token ({@link serviceAccountToken}); its path. The group has no rights until
   * bound (the chaos run binds it to the RBAC manifest's roles). `server` is the URL it names
   * (default kube-apiserver's; the chaos run gives each replica a fault proxy's).
   */
  async replicaKubeconfig(replica: string, server = this.info.server): Promise<string> {
    const token = await this.serviceAccountToken(REPLICA_NAMESPACE, replicaServiceAccount(replica));
    const path = `${this.info.dir}/replica-${replica}.kubeconfig`;
    await Deno.writeTextFile(
      path,
      await tokenKubeconfig(server, `${this.info.dir}/certs/ca.crt`, token, replicaUser(replica)),
    );
    return path;
  }

  /** Every call the driver served so far, from its log (all of its runs). */
  async driverCalls(): Promise<DriverCall[]> {
    return parseDriverCalls(await Deno.readTextFile(this.info.driverLog));
  }

  /** The audit records of the attacher's requests so far. */
  async auditEvents(): Promise<AuditEvent[]> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.info.auditLog);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw err;
    }
    return text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as AuditEvent);
  }

  /** Writes {@link info} to `<dir>/cluster.json`. */
  async saveInfo(): Promise<void> {
    await Deno.writeTextFile(`${this.info.dir}/cluster.json`, JSON.stringify(this.info, null, 2));
  }

  /** Lets the calling process exit while the cluster keeps running (`deno task cluster`). */
  detach(): void {
    for (const p of Object.values(this.#processes)) p?.detach();
    this.admin.close();
    this.#driverClient?.close();
    this.#driverClient = undefined;
  }

  /**
   * Stops the driver, kube-controller-manager, kube-apiserver and etcd (in that order) and closes
   * the clients.
   */
  async stop(): Promise<void> {
    this.#driverClient?.close();
    this.#driverClient = undefined;
    this.admin.close();
    for (const name of ["driver", "controllerManager", "apiserver", "etcd"] as const) {
      const p = this.#processes[name];
      if (p !== undefined) await p.stop(10_000);
    }
  }
}

/** Stops a cluster described by a saved {@link ClusterInfo} (from another process). */
export async function stopSavedCluster(info: ClusterInfo): Promise<void> {
  const pids = info.pids;
  // `?? 0`: a cluster.json written before kube-controller-manager was added.
  for (const pid of [pids.driver, pids.controllerManager ?? 0, pids.apiserver, pids.etcd]) {
    if (pid > 0) await stopGroup(pid, 10_000);
  }
}
