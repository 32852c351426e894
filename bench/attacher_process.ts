/**
 * Starting and stopping the attacher under test: any command line (ours, the Go binary, a
 * wrapper script) with the benchmark's flags appended, in its own process group, its output
 * appended to a log file.
 *
 * The command line is shell text: `sh -c 'exec <command line> "$@" >>"$log" 2>&1'`. The shell
 * becomes the program (`exec`), so the process id is the attacher's own and `/proc/<pid>` measures
 * the attacher alone; a command line that starts further processes is measured as a tree
 * ({@link import("./proc_stats.ts").ProcReader.sampleTree}).
 *
 * @module
 */

/** The flags every attacher gets, in the order they are appended. */
export interface AttacherFlags {
  kubeconfig: string;
  csiAddress: string;
  workerThreads: number;
  kubeApiQps: number;
  kubeApiBurst: number;
  /** Log verbosity (`--v`). */
  verbosity: number;
}

/** The flags as arguments, with Go `flag` syntax that both attachers accept. */
export function attacherArgs(flags: AttacherFlags): string[] {
  return [
    `--kubeconfig=${flags.kubeconfig}`,
    `--csi-address=${flags.csiAddress}`,
    `--worker-threads=${flags.workerThreads}`,
    `--kube-api-qps=${flags.kubeApiQps}`,
    `--kube-api-burst=${flags.kubeApiBurst}`,
    `--v=${flags.verbosity}`,
  ];
}

function isGone(err: unknown): boolean {
  return err instanceof Deno.errors.NotFound ||
    (err instanceof Error && /ESRCH|No such process/.test(err.message));
}

/** A running attacher. Use {@link AttacherProcess.start}; {@link AttacherProcess.stop} ends it. */
export class AttacherProcess {
  readonly #child: Deno.ChildProcess;
  readonly #logFile: string;
  /** Epoch ms of the spawn. */
  readonly startedAt: number;
  #exit: Deno.CommandStatus | undefined;
  readonly #status: Promise<Deno.CommandStatus>;

  /** Wraps a spawned child; use {@link AttacherProcess.start}. */
  constructor(deps: { child: Deno.ChildProcess }, options: { logFile: string; startedAt: number }) {
    this.#child = deps.child;
    this.#logFile = options.logFile;
    this.startedAt = options.startedAt;
    this.#status = deps.child.status.then((s) => (this.#exit = s));
  }

  /**
   * Spawns `commandLine` with `args` appended, output appended to `logFile`.
   *
   * @throws {TypeError} for an empty command line.
   */
  static start(commandLine: string, args: string[], logFile: string): AttacherProcess {
    if (commandLine.trim() === "") throw new TypeError("Cannot start the attacher: empty command");
    const startedAt = performance.timeOrigin + performance.now();
    const child = new Deno.Command("sh", {
      args: ["-c", `exec ${commandLine} "$@" >>"$BENCH_ATTACHER_LOG" 2>&1`, "sh", ...args],
      env: { BENCH_ATTACHER_LOG: logFile },
      stdin: "null",
      stdout: "null",
      stderr: "null",
      detached: true,
    }).spawn();
    return new AttacherProcess({ child }, { logFile, startedAt });
  }

  /** Process id (and process group id). */
  get pid(): number {
    return this.#child.pid;
  }

  /** The exit status once it has exited, else undefined. */
  get exited(): Deno.CommandStatus | undefined {
    return this.#exit;
  }

  /** The last `lines` lines of its output. */
  async logTail(lines = 30): Promise<string> {
    try {
      const text = await Deno.readTextFile(this.#logFile);
      return text.split("\n").slice(-lines - 1).join("\n");
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return "";
      throw err;
    }
  }

  /** Sends SIGTERM to the group, then SIGKILL after `graceMs`; resolves with the exit status. */
  async stop(graceMs = 10_000): Promise<Deno.CommandStatus> {
    if (this.#exit !== undefined) return this.#exit;
    this.#signal("SIGTERM");
    let timer: ReturnType<typeof setTimeout> | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#signal("SIGKILL");
        resolve();
      }, graceMs);
    });
    await Promise.race([this.#status, killed]);
    clearTimeout(timer);
    const status = await this.#status;
    // Anything the attacher started and left behind goes too.
    this.#signal("SIGKILL");
    return status;
  }

  #signal(signal: Deno.Signal): void {
    try {
      Deno.kill(-this.#child.pid, signal);
    } catch (err) {
      if (!isGone(err)) throw err;
    }
  }
}
