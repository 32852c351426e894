/**
 * The process metrics dashboards and memory alerts read from the Go sidecar, with the names,
 * types and help texts of client_golang's process collector (prometheus/client_golang
 * `prometheus/process_collector.go`, read on Linux as `process_collector_procfs.go` reads them,
 * through prometheus/procfs `proc_stat.go` and `proc_limits.go`):
 *
 * | metric | type | source, at each scrape |
 * | --- | --- | --- |
 * | `process_cpu_seconds_total` | counter | `/proc/self/stat` utime + stime, in ticks of `USER_HZ` (100, procfs' `userHZ`) |
 * | `process_open_fds` | gauge | entries of `/proc/self/fd` |
 * | `process_max_fds` | gauge | soft limit of "Max open files" in `/proc/self/limits` |
 * | `process_virtual_memory_bytes` | gauge | `/proc/self/stat` vsize |
 * | `process_virtual_memory_max_bytes` | gauge | soft limit of "Max address space" in `/proc/self/limits` |
 * | `process_network_receive_bytes_total` | counter | `InOctets` of the `IpExt` lines of `/proc/self/net/netstat` (the network namespace's, procfs `proc_netstat.go`) |
 * | `process_network_transmit_bytes_total` | counter | `OutOctets` of the same lines |
 * | `process_resident_memory_bytes` | gauge | `VmRSS` of `/proc/self/status` (the kernel's rss pages, in kB: procfs' rss × page size) |
 * | `process_start_time_seconds` | gauge | the runtime's time origin (set once) |
 *
 * Where `/proc` cannot be read (not Linux, or no read permission) the `/proc` metrics are left
 * out of the scrape, as client_golang leaves out what its platform cannot report.
 *
 * The Go sidecar also serves the `go_*` runtime family (`go_memstats_*`, `go_goroutines`, …),
 * which has no meaning for this runtime. In its place the JavaScript heap is served as gauges of
 * our own naming, read from `Deno.memoryUsage()` at each scrape: `deno_heap_used_bytes`,
 * `deno_heap_total_bytes` and `deno_heap_external_bytes` (what `go_memstats_heap_inuse_bytes`,
 * `go_memstats_heap_sys_bytes` and the off-heap buffers tell of a Go process).
 *
 * @module
 */

import { formatNumber, Gauge, type Registry } from "../wire/prometheus/registry.ts";

/** Help texts of the process metrics, by name (client_golang's for `process_*`). */
export const PROCESS_METRIC_HELP: Readonly<Record<string, string>> = Object.freeze({
  process_cpu_seconds_total: "Total user and system CPU time spent in seconds.",
  process_open_fds: "Number of open file descriptors.",
  process_max_fds: "Maximum number of open file descriptors.",
  process_virtual_memory_bytes: "Virtual memory size in bytes.",
  process_virtual_memory_max_bytes: "Maximum amount of virtual memory available in bytes.",
  process_network_receive_bytes_total: "Number of bytes received by the process over the network.",
  process_network_transmit_bytes_total: "Number of bytes sent by the process over the network.",
  process_resident_memory_bytes: "Resident memory size in bytes.",
  process_start_time_seconds: "Start time of the process since unix epoch in seconds.",
  deno_heap_used_bytes:
    "JavaScript heap in use, in bytes (Deno.memoryUsage().heapUsed); replaces the Go " +
    "sidecar's go_memstats_heap_inuse_bytes.",
  deno_heap_total_bytes:
    "JavaScript heap reserved by V8, in bytes (Deno.memoryUsage().heapTotal); replaces the Go " +
    "sidecar's go_memstats_heap_sys_bytes.",
  deno_heap_external_bytes:
    "Memory held outside the JavaScript heap by JavaScript objects such as ArrayBuffers, in " +
    "bytes (Deno.memoryUsage().external).",
});

/** procfs' `userHZ`: the unit of the CPU times in `/proc/<pid>/stat` on every Linux it supports. */
export const USER_HZ = 100;

/** What `/proc/self` tells at one moment; see the module doc for each field's source. */
export interface ProcessStats {
  /** `process_cpu_seconds_total`. */
  cpuSeconds: number;
  /** `process_open_fds`. */
  openFds: number;
  /** `process_max_fds`. */
  maxFds: number;
  /** `process_virtual_memory_bytes`. */
  virtualMemoryBytes: number;
  /** `process_resident_memory_bytes`. */
  residentMemoryBytes: number;
  /** `process_virtual_memory_max_bytes`. */
  virtualMemoryMaxBytes: number;
  /** `process_network_{receive,transmit}_bytes_total`; absent where netstat cannot be read. */
  network?: { receiveBytes: number; transmitBytes: number };
}

/** The fields of `/proc/<pid>/stat` the process metrics use. */
export interface StatFields {
  /** utime + stime, in `USER_HZ` ticks. */
  cpuTicks: number;
  /** vsize, bytes. */
  virtualMemoryBytes: number;
}

/**
 * Parses `/proc/<pid>/stat` (proc(5)): the command name is skipped up to its last `)`, since it
 * may hold spaces and parentheses; then utime (field 14), stime (15) and vsize (23).
 *
 * @throws {SyntaxError} when the text does not have those fields as numbers
 */
export function parseStat(text: string): StatFields {
  const end = text.lastIndexOf(")");
  // After ")": field 3 (state) is index 0, so field n is index n - 3.
  const fields = text.slice(end + 1).trim().split(/\s+/);
  const field = (n: number) => {
    const value = Number(fields[n - 3]);
    if (end < 0 || !Number.isFinite(value)) {
      throw new SyntaxError(`Cannot read field ${n} of /proc/self/stat`);
    }
    return value;
  };
  return { cpuTicks: field(14) + field(15), virtualMemoryBytes: field(23) };
}

/** What procfs reads `unlimited` as (`proc_limits.go` `parseUint`: the largest uint64). */
export const UNLIMITED = 18446744073709551615;

/**
 * The soft limit of "Max open files" in `/proc/<pid>/limits`; {@link UNLIMITED} for
 * `unlimited`.
 *
 * @throws {SyntaxError} when the line is missing
 */
export function parseMaxOpenFiles(text: string): number {
  const line = text.split("\n").find((l) => l.startsWith("Max open files"));
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
  if (soft === "unlimited") return UNLIMITED;
  const value = Number(soft);
  if (soft === undefined || !Number.isFinite(value)) {
    throw new SyntaxError("Cannot read Max open files of /proc/self/limits");
  }
  return value;
}

/**
 * The soft limit of `label` (e.g. "Max address space") in `/proc/<pid>/limits`; {@link UNLIMITED}
 * for `unlimited`.
 *
 * @throws {SyntaxError} when the line is missing
 */
export function parseLimit(text: string, label: string): number {
  const line = text.split("\n").find((l) => l.startsWith(label));
  const soft = line?.slice(label.length).trim().split(/\s+/)[0];
  if (soft === "unlimited") return UNLIMITED;
  const value = Number(soft);
  if (soft === undefined || !Number.isFinite(value)) {
    throw new SyntaxError(`Cannot read ${label} of /proc/self/limits`);
  }
  return value;
}

/**
 * `InOctets` and `OutOctets` of `/proc/<pid>/net/netstat`: the `IpExt:` line of names and the
 * `IpExt:` line of values after it.
 *
 * @throws {SyntaxError} when the lines or the fields are missing
 */
export function parseNetstatOctets(text: string): { receiveBytes: number; transmitBytes: number } {
  const lines = text.split("\n").filter((l) => l.startsWith("IpExt:"));
  const names = lines[0]?.split(/\s+/) ?? [];
  const values = lines[1]?.split(/\s+/) ?? [];
  const field = (name: string) => {
    const value = Number(values[names.indexOf(name)]);
    if (names.indexOf(name) < 1 || !Number.isFinite(value)) {
      throw new SyntaxError(`Cannot read IpExt ${name} of /proc/self/net/netstat`);
    }
    return value;
  };
  return { receiveBytes: field("InOctets"), transmitBytes: field("OutOctets") };
}

/** The network counters, or undefined where netstat cannot be read (client_golang skips them). */
function readNetwork(): { receiveBytes: number; transmitBytes: number } | undefined {
  try {
    return parseNetstatOctets(Deno.readTextFileSync("/proc/self/net/netstat"));
  } catch {
    return undefined;
  }
}

/**
 * `VmRSS` of `/proc/<pid>/status`, in bytes.
 *
 * @throws {SyntaxError} when the line is missing
 */
export function parseResidentBytes(text: string): number {
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(text);
  if (match === null) throw new SyntaxError("Cannot read VmRSS of /proc/self/status");
  return Number(match[1]) * 1024;
}

/** Reads `/proc/self`; undefined when it cannot be read (see the module doc). */
export function readProcessStats(): ProcessStats | undefined {
  try {
    const stat = parseStat(Deno.readTextFileSync("/proc/self/stat"));
    let openFds = 0;
    for (const _ of Deno.readDirSync("/proc/self/fd")) openFds++;
    const limits = Deno.readTextFileSync("/proc/self/limits");
    const network = readNetwork();
    return {
      cpuSeconds: stat.cpuTicks / USER_HZ,
      openFds,
      maxFds: parseMaxOpenFiles(limits),
      virtualMemoryMaxBytes: parseLimit(limits, "Max address space"),
      ...(network === undefined ? {} : { network }),
      virtualMemoryBytes: stat.virtualMemoryBytes,
      residentMemoryBytes: parseResidentBytes(Deno.readTextFileSync("/proc/self/status")),
    };
  } catch {
    return undefined; // no /proc here: the /proc metrics are left out
  }
}

/** Where {@link registerProcessMetrics} reads from; the defaults read this process. */
export interface ProcessMetricsSources {
  /** Reads the `/proc` figures; undefined leaves them out. @default readProcessStats */
  stats?: () => ProcessStats | undefined;
  /** Reads the JavaScript heap. @default Deno.memoryUsage */
  memory?: () => Pick<Deno.MemoryUsage, "heapUsed" | "heapTotal" | "external">;
}

/** The process metrics of one registry; {@link refresh} reads the sources. */
export interface ProcessMetrics {
  /** Reads `/proc/self` and the heap into the metrics; call it before each scrape. */
  refresh(): void;
}

/**
 * Registers the process metrics (see the module doc) in `registry`; they take their values at
 * each {@link ProcessMetrics.refresh}. `startTimeSeconds` is `process_start_time_seconds`.
 */
export function registerProcessMetrics(
  registry: Registry,
  startTimeSeconds: number,
  sources: ProcessMetricsSources = {},
): ProcessMetrics {
  const readStats = sources.stats ?? readProcessStats;
  const readMemory = sources.memory ?? (() => Deno.memoryUsage());
  // A gauge is written once it has a value: the /proc ones only where /proc could be read.
  const gauge = (name: string) => {
    const metric = new Gauge({ name, help: PROCESS_METRIC_HELP[name]!, registry });
    return { set: (value: number) => metric.set({}, value) };
  };
  const openFds = gauge("process_open_fds");
  const maxFds = gauge("process_max_fds");
  const virtualMemory = gauge("process_virtual_memory_bytes");
  const virtualMemoryMax = gauge("process_virtual_memory_max_bytes");
  const residentMemory = gauge("process_resident_memory_bytes");
  gauge("process_start_time_seconds").set(startTimeSeconds);
  const heapUsed = gauge("deno_heap_used_bytes");
  const heapTotal = gauge("deno_heap_total_bytes");
  const heapExternal = gauge("deno_heap_external_bytes");
  // The registry's counters only go up by increments; the CPU time and the network octets are
  // read whole, so their families are written here, in the registry's text layout.
  const wholeCounter = (name: string, read: () => number | undefined) => {
    registry.register({
      name,
      write(out: string[]): void {
        const value = read();
        if (value === undefined) return;
        out.push(
          `# HELP ${name} ${PROCESS_METRIC_HELP[name]}`,
          `# TYPE ${name} counter`,
          `${name} ${formatNumber(value)}`,
        );
      },
    });
  };
  let cpuSeconds: number | undefined;
  let network: ProcessStats["network"];
  wholeCounter("process_cpu_seconds_total", () => cpuSeconds);
  wholeCounter("process_network_receive_bytes_total", () => network?.receiveBytes);
  wholeCounter("process_network_transmit_bytes_total", () => network?.transmitBytes);
  return {
    refresh(): void {
      const memory = readMemory();
      heapUsed.set(memory.heapUsed);
      heapTotal.set(memory.heapTotal);
      heapExternal.set(memory.external);
      const stats = readStats();
      if (stats === undefined) return;
      cpuSeconds = stats.cpuSeconds;
      network = stats.network;
      virtualMemoryMax.set(stats.virtualMemoryMaxBytes);
      openFds.set(stats.openFds);
      maxFds.set(stats.maxFds);
      virtualMemory.set(stats.virtualMemoryBytes);
      residentMemory.set(stats.residentMemoryBytes);
    },
  };
}
