/**
 * Long-running child processes of the suite (etcd, kube-apiserver, the CSI driver, attachers),
 * each in its own process group with its output appended to a log file, so that stopping one
 * stops everything it started and the cluster can outlive the command that started it
 * (`deno task cluster`).
 *
 * @module
 */

/** How to start a {@link ManagedProcess}. */
export interface ProcessSpec {
  /** Short name for messages, e.g. `etcd`. */
  name: string;
  cmd: string;
  args: string[];
  /** Standard output and error are appended here. */
  logFile: string;
  /** Extra environment variables. */
  env?: Record<string, string>;
  cwd?: string;
  /**
   * When set, the process group is SIGKILLed once this process (normally the caller, `Deno.pid`)
   * is gone, however it ended: a watchdog shell in the group polls it every second.
   */
  ownerPid?: number;
}

function isGone(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound ||
    (err instanceof Error && /ESRCH|No such process/.test(err.message));
}

/** Sends `signal` to process group `pgid`; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: Deno.Signal): boolean {
  try {
    Deno.kill(-pgid, signal);
    return true;
  } catch (err) {
    if (isGone(err)) return false;
    throw err;
  }
}

/** True while process `pid` exists and is not a zombie (Linux `/proc`). */
export function isRunning(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** True while any process of group `pgid` is alive (Linux `/proc`). */
export function groupAlive(pgid: number): boolean {
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    let stat: string;
    try {
      stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied) {
        continue;
      }
      throw err;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] !== "Z" && Number(fields[2]) === pgid) return true;
  }
  return false;
}

/**
 * Stops a process group: SIGTERM, then SIGKILL after `graceMs`; resolves once no member is
 * left. Works for groups started by another command too.
 */
export async function stopGroup(pgid: number, graceMs: number): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const deadline = Date.now() + graceMs;
  while (groupAlive(pgid)) {
    if (Date.now() >= deadline) {
      signalGroup(pgid, "SIGKILL");
      await new Promise((r) => setTimeout(r, 100));
      if (!groupAlive(pgid)) return;
      continue;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A child process in its own session and process group (`setsid`), output appended to a file.
 * The constructor does nothing; {@link ManagedProcess.start} spawns.
 */
export class ManagedProcess {
  readonly spec: ProcessSpec;
  #child: Deno.ChildProcess | undefined;
  #status: Promise<Deno.CommandStatus> | undefined;
  #exited: Deno.CommandStatus | undefined;
  #startedAt = 0;

  constructor(spec: ProcessSpec) {
    this.spec = spec;
  }

  /** Spawns a process for `spec`. */
  static start(spec: ProcessSpec): ManagedProcess {
    const p = new ManagedProcess(spec);
    p.#spawn();
    return p;
  }

  #spawn(): void {
    const { spec } = this;
    // The shell sets up the redirection (and the optional watchdog, which kills the whole group
    // once the owner is gone), then becomes the program (exec): the pid is the program's.
    const script = 'owner="$1"; log="$2"; shift 2; ' +
      'if [ -n "$owner" ]; then ' +
      '( while kill -0 "$owner" 2>/dev/null; do sleep 1; done; kill -KILL 0 ) >/dev/null 2>&1 & ' +
      "fi; " +
      'exec "$@" >>"$log" 2>&1';
    this.#child = new Deno.Command("sh", {
      args: [
        "-c",
        script,
        "sh",
        spec.ownerPid === undefined ? "" : String(spec.ownerPid),
        spec.logFile,
        spec.cmd,
        ...spec.args,
      ],
      env: spec.env,
      cwd: spec.cwd,
      stdin: "null",
      stdout: "null",
      stderr: "null",
      detached: true,
    }).spawn();
    this.#startedAt = Date.now();
    this.#exited = undefined;
    this.#status = this.#child.status.then((s) => {
      this.#exited = s;
      return s;
    });
  }

  /** The process id (also its process group id). */
  get pid(): number {
    if (this.#child === undefined) throw new Error(`${this.spec.name} was never started`);
    return this.#child.pid;
  }

  /** Wall-clock time (ms since the epoch) of the last start. */
  get startedAt(): number {
    return this.#startedAt;
  }

  /** The exit status once it exited; undefined while it runs. */
  get exitStatus(): Deno.CommandStatus | undefined {
    return this.#exited;
  }

  /** Resolves with the exit status. */
  get status(): Promise<Deno.CommandStatus> {
    if (this.#status === undefined) throw new Error(`${this.spec.name} was never started`);
    return this.#status;
  }

  /** Sends a signal to the whole group (no-op once it is gone). */
  kill(signal: Deno.Signal): void {
    if (this.#exited !== undefined && !groupAlive(this.pid)) return;
    signalGroup(this.pid, signal);
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves with the exit status. */
  async stop(graceMs = 5000): Promise<Deno.CommandStatus> {
    await stopGroup(this.pid, graceMs);
    return await this.status;
  }

  /** Starts the same command again (after it stopped). */
  async restart(): Promise<void> {
    if (this.#child !== undefined && this.#exited === undefined) await this.stop();
    this.#spawn();
  }

  /** Lets the calling process exit while this one keeps running. */
  detach(): void {
    this.#child?.unref();
  }

  /** The log file's text so far. */
  async output(): Promise<string> {
    try {
      return await Deno.readTextFile(this.spec.logFile);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return "";
      throw err;
    }
  }

  /** The last `lines` lines of the log, for error messages. */
  async tail(lines = 30): Promise<string> {
    return (await this.output()).split("\n").slice(-lines - 1).join("\n");
  }
}
