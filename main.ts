/**
 * csi-attacher: watches VolumeAttachments and attaches volumes through a CSI driver's
 * ControllerPublishVolume / ControllerUnpublishVolume.
 *
 * This file only reads the process environment and wires the pieces together; the behaviour
 * lives in `lib/`; the sandbox subcommand is loaded from `sandbox/` only when given.
 *
 * @module
 */

import { runAttacher } from "./lib/run.ts";
import type { KubeClient, KubeRequestObserver } from "./lib/kube/client.ts";
import {
  KubeClientFactory,
  type ProxyEnvironment,
  TRANSPORT_VARIABLES,
} from "./lib/kube/client_factory.ts";
import { loadConnection } from "./lib/kube/config.ts";
import { SERVICE_ACCOUNT_NAMESPACE_FILE } from "./lib/leaderelection/config.ts";
import { createLogger } from "./lib/observe/log.ts";
import type { Logger } from "./lib/observe/logger.ts";
import { parseOptions, validateOptions } from "./lib/cli/options.ts";
import { componentSettings, type KubeClientSettings, loggingSettings } from "./lib/cli/settings.ts";
import { TokenBucket } from "./lib/workqueue/token_bucket.ts";
import { VERSION } from "./lib/version.ts";
import { COMPONENT_NAME } from "./lib/component.ts";
import { realClock, type Timer } from "./lib/clock.ts";

const TERMINATION_LOG = "/dev/termination-log";

/** How long past `--timeout` the process may take to stop after a signal before it exits 1. */
const STOP_GRACE_MS = 5000;

function writeStderr(text: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(text.endsWith("\n") ? text : `${text}\n`));
}

function env(name: string): string | undefined {
  return Deno.env.get(name);
}

function readFile(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return undefined; // not running in a pod
  }
}

function writeTerminationMessage(message: string): void {
  try {
    Deno.writeTextFileSync(TERMINATION_LOG, message);
  } catch {
    // Not in a pod, or the file is not writable: the log line carries the message.
  }
}

/**
 * The variables the transport reads (proxies, `DISABLE_HTTP2`) as set in the environment; none
 * when the environment cannot be read.
 */
function proxyEnvironment(): ProxyEnvironment {
  const vars: Record<string, string | undefined> = {};
  for (const name of TRANSPORT_VARIABLES) {
    try {
      vars[name] = env(name);
    } catch {
      // No permission to read the environment: no proxy.
    }
  }
  return vars;
}

async function kubeFactory(
  settings: KubeClientSettings,
  log: Logger,
): Promise<(observer: KubeRequestObserver) => KubeClient> {
  const host = env("KUBERNETES_SERVICE_HOST");
  const connection = await loadConnection({
    kubeconfigPath: settings.kubeconfig,
    inCluster: host ? { host, port: env("KUBERNETES_SERVICE_PORT") ?? "443" } : undefined,
    kubeconfigEnv: env("KUBECONFIG"),
    home: env("HOME"),
  }, { log });
  // One connection pool for every client; a rate limiter of --kube-api-qps/burst for each.
  const factory = new KubeClientFactory({
    connection,
    log,
    rateLimiter: () => new TokenBucket({}, { qps: settings.qps, burst: settings.burst }),
  }, {
    userAgent: `${COMPONENT_NAME}/${VERSION}`,
    proxyEnvironment: proxyEnvironment(),
  });
  return (observer) => factory.create(observer);
}

async function main(argv: string[]): Promise<number> {
  // `deno task dev -- --flag` passes the `--` on; Go's flag package would stop at it and ignore
  // every flag after it, so a leading `--` is dropped.
  const args = argv[0] === "--" ? argv.slice(1) : argv;
  if (args[0] === "sandbox") {
    // Loaded only for the subcommand: the sandbox brings the test kit's in-memory API server and
    // example driver, which the attacher itself never needs.
    const { runSandbox } = await import("./sandbox/main.ts");
    return await runSandbox(args.slice(1), { write: (line) => console.log(line) });
  }
  const parsed = parseOptions(args);
  if (!parsed.ok) {
    if ("help" in parsed) {
      writeStderr(parsed.usage);
      return 0;
    }
    if ("version" in parsed) {
      console.log(`${COMPONENT_NAME} ${VERSION}`);
      return 0;
    }
    if (parsed.exitCode === 2) {
      writeStderr(`${parsed.error}\n${parsed.usage}`);
      return 2;
    }
    createLogger({ verbosity: 0, format: "text" }).error(parsed.cause, parsed.error);
    return 1;
  }
  // The options are checked before any setting is built from them; the log reports the verdict.
  const log = createLogger(loggingSettings(parsed.options));
  const invalid = validateOptions(parsed.options);
  if (invalid !== undefined) {
    log.error(undefined, invalid);
    return 1;
  }
  const settings = componentSettings(parsed.options);
  log.info("Version", { version: VERSION });

  // In-flight CSI calls are bounded by --timeout; do not outlive them by much.
  const stop = stopOnSignals(log, settings.csi.callTimeoutMs + STOP_GRACE_MS);
  try {
    const kube = await kubeFactory(settings.kubeClient, log);
    await runAttacher(settings, {
      log,
      signal: stop.signal,
      kube,
      env: {
        exit: (code) => Deno.exit(code),
        writeTerminationMessage,
        // In a pod HOSTNAME is the pod name, which is also the host name.
        hostname: () => env("HOSTNAME") || Deno.hostname(),
        podNamespace: env("POD_NAMESPACE"),
        readServiceAccountNamespace: () => readFile(SERVICE_ACCOUNT_NAMESPACE_FILE),
      },
    });
  } catch (err) {
    log.error(err, "Attacher failed");
    return 1;
  } finally {
    stop.dispose();
  }
  return 0;
}

/**
 * Aborts `signal` at the first SIGTERM or SIGINT, then exits 1 at a second one or when the work
 * in flight has not finished `graceMs` later. `dispose` removes the listeners and the timer.
 */
function stopOnSignals(
  log: Logger,
  graceMs: number,
): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  let stopDeadline: Timer | undefined;
  const onSignal = (signal: Deno.Signal) => {
    if (stop.signal.aborted) {
      log.info("Second signal received, exiting at once", { signal });
      Deno.exit(1);
    }
    log.info("Signal received, finishing work in flight", { signal });
    stop.abort();
    stopDeadline = realClock.setTimer(graceMs, () => {
      log.info("Work in flight did not finish in time, exiting");
      Deno.exit(1);
    });
  };
  const sigterm = () => onSignal("SIGTERM");
  const sigint = () => onSignal("SIGINT");
  Deno.addSignalListener("SIGTERM", sigterm);
  Deno.addSignalListener("SIGINT", sigint);
  return {
    signal: stop.signal,
    dispose() {
      stopDeadline?.cancel();
      Deno.removeSignalListener("SIGTERM", sigterm);
      Deno.removeSignalListener("SIGINT", sigint);
    },
  };
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
