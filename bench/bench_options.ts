/**
 * The benchmark's command line (`deno task bench -- [flags]`).
 *
 * @module
 */

import { parseArgs } from "node:util";

/** Parsed flags of the benchmark. */
export interface BenchOptions {
  /** Use the in-memory API server and example driver instead of the e2e cluster. */
  fake: boolean;
  /** N of the unthrottled scenarios, ascending. The throttled one runs for each N ≤ 100. */
  sizes: number[];
  /** Skip the scenario at the default client limits (qps 5, burst 10). */
  skipThrottled: boolean;
  /**
   * Run the detach flood instead of the usual scenarios: unpublishes take
   * {@link DETACH_FLOOD_UNPUBLISH_MS}, and a new VA is created while the N detaches run.
   */
  detachFlood: boolean;
  /**
   * Drive the N through Pods and kube-controller-manager's attach/detach controller instead of
   * creating VolumeAttachments (cluster only, unthrottled scenarios only).
   */
  pods: boolean;
  /** Attacher command lines; empty means ours as shipped (`shipped_form.ts`). At most two. */
  attacherCommands: string[];
  /** Runs per attacher and scenario. */
  runs: number;
  /** `--worker-threads` of the attachers. */
  workers: number;
  /** Nodes (CSINodes; with `pods`, Nodes) the VolumeAttachments are spread over. */
  nodes: number;
  /** Length of the rest phase, ms. */
  restMs: number;
  /** Directory of the JSON results (and the attachers' logs). */
  outDir: string;
  help: boolean;
}

/** Usage text. */
export const BENCH_USAGE = `Usage: deno task bench -- [flags]

Runs N VolumeAttachments (each with its own PV, over 50 nodes with CSINodes) created at once,
then deleted, through an attacher, and prints throughput, latency, API requests and CSI calls
per attach and detach, CPU and memory. Writes bench/results/<date>.json.

  --fake                  in-memory API server and example driver (one process each) instead
                          of the e2e cluster (kube-apiserver + etcd + CSI mock driver)
  --sizes=100,1000        N of the unthrottled scenarios (default: 100,1000 with --fake,
                          100,1000,5000 otherwise); the throttled scenario (qps 5, burst 10)
                          runs for each N <= 100. With two or more unthrottled N the report
                          adds the RSS per cached VA + PV pair: the slope of the medians
                          between the two largest (e.g. --sizes=100,5000,20000)
  --skip-throttled        do not run the throttled scenario
  --detach-flood          only the detach flood (needs --fake): N VolumeAttachments attached
                          (default N=1000), the driver's ControllerUnpublishVolume set to take
                          100 ms, all N deleted at once, then one new VolumeAttachment created;
                          the seconds until it is attached are floodAttachLatencySeconds
  --pods                  drive the N through Pods instead (not with --fake; default N=100,
                          --nodes=5, unthrottled only): kube-controller-manager's attach/detach
                          controller creates and deletes the VolumeAttachments; adds Pod created
                          -> volume in its Node's status.volumesAttached, and Pod deleted -> volume
                          gone from it (the "pods" figures of each run)
  --attacher-cmd='CMD'    the attacher's command line (shell text); --kubeconfig, --csi-address,
                          --worker-threads, --kube-api-qps, --kube-api-burst and --v=1 are
                          appended. Give it twice to compare two attachers (runs alternate
                          A B A B; the table shows both and B/A), or up to six times (A B C ...,
                          e.g. one attacher under several V8 flag sets). Default: ours as shipped:
                          the compiled binary when DENORT_BIN is set, else the bundle run
                          with the compile task's permissions and V8 flags; either under
                          the Containerfile's ENV (env NAME=VALUE ...)
  --runs=N                runs per attacher and scenario (default 1, or 3 with two or more);
                          the table shows medians
  --workers=10            --worker-threads of the attacher
  --nodes=50              nodes the VolumeAttachments are spread over (5 with --pods)
  --rest=3000             ms to wait with everything attached before reading the RSS at rest
  --out=DIR               where to write the JSON and the attacher logs (default bench/results)
  -h, --help              this text

Other modes (their own flags; see bench/README.md):
  --footprint             where one attacher's memory is after start, at rest, at the peaks
                          (smaps_rollup, V8 heap over the inspector, heap snapshots)
  --soak=N                memory under N cycles of churn
  --takeover --fake       a standby taking over N attached VolumeAttachments after the leader
                          is SIGKILLed (--sizes, --runs, --nodes, --attacher-cmd as above)
`;

/** How long each ControllerUnpublishVolume takes in the detach flood, ms. */
export const DETACH_FLOOD_UNPUBLISH_MS = 100;

/** Most `--attacher-cmd`s of one run: their labels are the letters A to F. */
export const MAX_ATTACHERS = 6;

/** A bad command line. */
export class BenchUsageError extends Error {
  /** Makes the error; `message` says what is wrong. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "BenchUsageError";
  }
}

function positiveInt(name: string, text: string): number {
  if (!/^\d+$/.test(text) || Number(text) <= 0) {
    throw new BenchUsageError(`Cannot parse --${name}: "${text}" is not a positive integer`);
  }
  return Number(text);
}

/**
 * Parses the benchmark's flags.
 *
 * @param args the arguments; a leading `--` (as `deno task bench -- …` passes it) is skipped.
 * @param defaultOutDir used when `--out` is absent.
 * @throws {BenchUsageError} for an unknown flag, a bad number or more than two attachers.
 */
export function parseBenchOptions(args: string[], defaultOutDir: string): BenchOptions {
  // `deno task bench -- --fake` passes the `--` on.
  if (args[0] === "--") args = args.slice(1);
  let values;
  try {
    ({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        fake: { type: "boolean", default: false },
        sizes: { type: "string" },
        "skip-throttled": { type: "boolean", default: false },
        "detach-flood": { type: "boolean", default: false },
        pods: { type: "boolean", default: false },
        "attacher-cmd": { type: "string", multiple: true },
        runs: { type: "string" },
        workers: { type: "string", default: "10" },
        nodes: { type: "string" },
        rest: { type: "string", default: "3000" },
        out: { type: "string", default: defaultOutDir },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (err) {
    throw new BenchUsageError(err instanceof Error ? err.message : String(err), { cause: err });
  }
  const fake = values.fake === true;
  const detachFlood = values["detach-flood"] === true;
  if (detachFlood && !fake) {
    throw new BenchUsageError("Cannot run --detach-flood without --fake");
  }
  const pods = values.pods === true;
  if (pods && fake) throw new BenchUsageError("Cannot run --pods with --fake");
  if (pods && detachFlood) throw new BenchUsageError("Cannot run --pods with --detach-flood");
  const defaultSizes = detachFlood || pods
    ? (pods ? "100" : "1000")
    : fake
    ? "100,1000"
    : "100,1000,5000";
  const sizes = (values.sizes ?? defaultSizes)
    .split(",")
    .filter((s) => s.trim() !== "")
    .map((s) => positiveInt("sizes", s.trim()));
  if (sizes.length === 0) throw new BenchUsageError("Cannot run: --sizes is empty");
  const attacherCommands = values["attacher-cmd"] ?? [];
  if (attacherCommands.length > MAX_ATTACHERS) {
    throw new BenchUsageError(
      `Cannot compare ${attacherCommands.length} attachers: give --attacher-cmd at most ${MAX_ATTACHERS} times`,
    );
  }
  if (attacherCommands.some((c) => c.trim() === "")) {
    throw new BenchUsageError("Cannot run an empty --attacher-cmd");
  }
  return {
    fake,
    sizes: [...new Set(sizes)].sort((a, b) => a - b),
    skipThrottled: values["skip-throttled"] === true,
    detachFlood,
    pods,
    attacherCommands,
    runs: values.runs === undefined
      ? (attacherCommands.length >= 2 ? 3 : 1)
      : positiveInt("runs", values.runs),
    workers: positiveInt("workers", values.workers ?? "10"),
    nodes: positiveInt("nodes", values.nodes ?? (pods ? "5" : "50")),
    restMs: positiveInt("rest", values.rest ?? "3000"),
    outDir: values.out ?? defaultOutDir,
    help: values.help === true,
  };
}
