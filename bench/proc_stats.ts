/**
 * CPU time and memory of a process and its descendants, read from Linux `/proc`.
 *
 * CPU is `utime + stime + cutime + cstime` of `/proc/<pid>/stat` (children that were reaped are
 * counted through their parent's `cutime`/`cstime`), memory is `VmRSS` and `VmHWM` (peak RSS) of
 * `/proc/<pid>/status`. An attacher started through `sh -c 'exec …'` is one process; one started
 * through a wrapper (`deno task`, a script) is summed over the whole tree, and its peak is then
 * the sum of each member's peak, an upper bound.
 *
 * Context switches are `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of each thread's
 * `/proc/<pid>/task/<tid>/status` (the process's own `status` counts its main thread only):
 * a voluntary switch is a thread going to sleep until something wakes it (data on a socket, a
 * timer, another thread), so their count is how many times the process was woken; an involuntary
 * one is a thread preempted while it still had work. Threads that already exited are not counted.
 *
 * @module
 */

/**
 * Whether reading a process's `/proc` file failed because the process is gone: the directory no
 * longer there (`ENOENT`, NotFound), or the process exited between the open and the read, which
 * Linux answers with `ESRCH` (Deno: an `Error` "No such process (os error 3)", no class of its own).
 */
export function processGone(err: unknown): boolean {
  if (err instanceof Deno.errors.NotFound) return true;
  if (!(err instanceof Error)) return false;
  return (err as { code?: unknown }).code === "ESRCH" || /\(os error 3\)$/.test(err.message);
}

/** One process's counters. */
export interface ProcSample {
  pid: number;
  ppid: number;
  /** Own user + system CPU plus that of reaped children, in seconds. */
  cpuSeconds: number;
  /** Resident set size now, bytes; 0 when unknown (e.g. a zombie). */
  rssBytes: number;
  /** Peak resident set size, bytes; 0 when unknown. */
  peakRssBytes: number;
}

/** A process tree's counters: sums over the live members. */
export interface TreeSample {
  cpuSeconds: number;
  rssBytes: number;
  peakRssBytes: number;
  /** PIDs that were summed, root first. */
  pids: number[];
}

/** Parsed fields of `/proc/<pid>/stat`. */
export interface StatFields {
  ppid: number;
  /** Clock ticks. */
  utime: number;
  stime: number;
  cutime: number;
  cstime: number;
}

/**
 * Parses `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses, so the
 * fields are counted from the last `)`.
 *
 * @throws {SyntaxError} when the text does not have the expected shape.
 */
export function parseStat(text: string): StatFields {
  const close = text.lastIndexOf(")");
  const rest = close < 0 ? [] : text.slice(close + 1).trim().split(/\s+/);
  // rest[0] is field 3 (state), so field k is rest[k - 3].
  const field = (k: number) => Number(rest[k - 3]);
  const out = {
    ppid: field(4),
    utime: field(14),
    stime: field(15),
    cutime: field(16),
    cstime: field(17),
  };
  if (Object.values(out).some((v) => !Number.isFinite(v))) {
    throw new SyntaxError(`Cannot parse /proc stat line: ${JSON.stringify(text.slice(0, 80))}`);
  }
  return out;
}

/** `VmRSS` and `VmHWM` of a `/proc/<pid>/status` text, in bytes (0 when absent). */
export function parseStatusMemory(text: string): { rssBytes: number; peakRssBytes: number } {
  const kb = (key: string) => {
    const m = text.match(new RegExp(`^${key}:\\s+(\\d+)\\s+kB`, "m"));
    return m ? Number(m[1]) * 1024 : 0;
  };
  return { rssBytes: kb("VmRSS"), peakRssBytes: kb("VmHWM") };
}

/** Context switches of a process's threads (see the module doc). */
export interface ContextSwitches {
  /** Times a thread went to sleep and was woken later. */
  voluntary: number;
  /** Times a thread was preempted. */
  involuntary: number;
}

/** The context switch counters of a `/proc/<pid>/status` text (0 when absent). */
export function parseContextSwitches(text: string): ContextSwitches {
  const count = (key: string) => {
    const m = text.match(new RegExp(`^${key}:\\s+(\\d+)$`, "m"));
    return m ? Number(m[1]) : 0;
  };
  return {
    voluntary: count("voluntary_ctxt_switches"),
    involuntary: count("nonvoluntary_ctxt_switches"),
  };
}

/** Reads `/proc` for a benchmark; `clockTicks` converts stat ticks to seconds. */
export class ProcReader {
  readonly #clockTicks: number;

  /** `clockTicks` is `getconf CLK_TCK` (100 on Linux unless the kernel was built otherwise). */
  constructor(options: { clockTicks?: number } = {}) {
    this.#clockTicks = options.clockTicks ?? 100;
  }

  /** Asks `getconf CLK_TCK`; 100 when that fails. */
  static async create(): Promise<ProcReader> {
    let ticks = 100;
    try {
      const out = await new Deno.Command("getconf", { args: ["CLK_TCK"], stderr: "null" })
        .output();
      const value = Number(new TextDecoder().decode(out.stdout).trim());
      if (out.success && value > 0) ticks = value;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    return new ProcReader({ clockTicks: ticks });
  }

  /** One process, or undefined when it is gone. */
  sample(pid: number): ProcSample | undefined {
    let stat: StatFields;
    let status: string;
    try {
      stat = parseStat(Deno.readTextFileSync(`/proc/${pid}/stat`));
      status = Deno.readTextFileSync(`/proc/${pid}/status`);
    } catch (err) {
      if (processGone(err)) return undefined;
      throw err;
    }
    const ticks = stat.utime + stat.stime + stat.cutime + stat.cstime;
    return {
      pid,
      ppid: stat.ppid,
      cpuSeconds: ticks / this.#clockTicks,
      ...parseStatusMemory(status),
    };
  }

  /**
   * The context switches of every live thread of `pids`, summed (threads and processes that exit
   * while they are read are skipped).
   */
  contextSwitches(pids: readonly number[]): ContextSwitches {
    const out: ContextSwitches = { voluntary: 0, involuntary: 0 };
    for (const pid of pids) {
      let tasks: Deno.DirEntry[];
      try {
        tasks = [...Deno.readDirSync(`/proc/${pid}/task`)];
      } catch (err) {
        if (processGone(err)) continue;
        throw err;
      }
      for (const task of tasks) {
        let status: string;
        try {
          status = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/status`);
        } catch (err) {
          if (processGone(err)) continue;
          throw err;
        }
        const s = parseContextSwitches(status);
        out.voluntary += s.voluntary;
        out.involuntary += s.involuntary;
      }
    }
    return out;
  }

  /** `pid` and its live descendants, summed; undefined when `pid` is gone. */
  sampleTree(pid: number): TreeSample | undefined {
    const root = this.sample(pid);
    if (root === undefined) return undefined;
    const children = new Map<number, number[]>();
    for (const entry of Deno.readDirSync("/proc")) {
      if (!/^\d+$/.test(entry.name)) continue;
      const child = Number(entry.name);
      if (child === pid) continue;
      let ppid: number;
      try {
        ppid = parseStat(Deno.readTextFileSync(`/proc/${child}/stat`)).ppid;
      } catch (err) {
        if (processGone(err)) continue; // exited meanwhile
        throw err;
      }
      children.set(ppid, [...(children.get(ppid) ?? []), child]);
    }
    const out: TreeSample = {
      cpuSeconds: root.cpuSeconds,
      rssBytes: root.rssBytes,
      peakRssBytes: root.peakRssBytes,
      pids: [pid],
    };
    const stack = [...(children.get(pid) ?? [])];
    while (stack.length > 0) {
      const next = stack.pop() as number;
      const s = this.sample(next);
      if (s === undefined) continue;
      out.cpuSeconds += s.cpuSeconds;
      out.rssBytes += s.rssBytes;
      out.peakRssBytes += s.peakRssBytes;
      out.pids.push(next);
      stack.push(...(children.get(next) ?? []));
    }
    return out;
  }
}
