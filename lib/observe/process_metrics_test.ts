import assert from "node:assert/strict";
import { Registry } from "../wire/prometheus/registry.ts";
import {
  parseLimit,
  parseMaxOpenFiles,
  parseNetstatOctets,
  parseResidentBytes,
  parseStat,
  PROCESS_METRIC_HELP,
  readProcessStats,
  registerProcessMetrics,
  UNLIMITED,
} from "./process_metrics.ts";

/** A /proc/<pid>/stat line whose command name holds spaces and parentheses. */
function statLine(fields: { utime: number; stime: number; vsize: number }): string {
  // Fields 3..52 after the name; field n sits at index n - 3.
  const rest = Array.from({ length: 50 }, (_, i) => String(i + 3));
  rest[0] = "S";
  rest[14 - 3] = String(fields.utime);
  rest[15 - 3] = String(fields.stime);
  rest[23 - 3] = String(fields.vsize);
  return `4242 (deno (worker) x) ${rest.join(" ")}\n`;
}

Deno.test("parseStat() reads utime, stime and vsize after the last ')' of the command name", () => {
  const stat = parseStat(statLine({ utime: 250, stime: 75, vsize: 1_234_567_890 }));
  assert.deepEqual(stat, { cpuTicks: 325, virtualMemoryBytes: 1_234_567_890 });
  assert.throws(() => parseStat("4242 (deno) S 1 2"), SyntaxError);
  assert.throws(() => parseStat("no parenthesis at all"), SyntaxError);
});

Deno.test("parseMaxOpenFiles() reads the soft limit; unlimited is procfs' largest uint64", () => {
  const limits = (soft: string) =>
    [
      "Limit                     Soft Limit           Hard Limit           Units     ",
      "Max cpu time              unlimited            unlimited            seconds   ",
      `Max open files            ${soft}                 524288               files     `,
      "Max locked memory         8388608              8388608              bytes     ",
    ].join("\n");
  assert.equal(parseMaxOpenFiles(limits("1024")), 1024);
  assert.equal(parseMaxOpenFiles(limits("unlimited")), UNLIMITED);
  assert.throws(() => parseMaxOpenFiles("Limit Soft Limit\n"), SyntaxError);
});

Deno.test("parseLimit() reads a soft limit, unlimited as the largest uint64", () => {
  const limits =
    "Limit                     Soft Limit           Hard Limit           Units     \n" +
    "Max open files            1024                 524288               files     \n" +
    "Max address space         unlimited            unlimited            bytes     \n" +
    "Max locked memory         8388608              8388608              bytes     \n";
  assert.equal(parseLimit(limits, "Max address space"), UNLIMITED);
  assert.equal(parseLimit(limits, "Max locked memory"), 8388608);
  assert.throws(() => parseLimit(limits, "Max nice priority"), SyntaxError);
});

Deno.test("parseNetstatOctets() reads InOctets and OutOctets of the IpExt lines", () => {
  const netstat = "TcpExt: SyncookiesSent SyncookiesRecv\nTcpExt: 0 0\n" +
    "IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts " +
    "InOctets OutOctets InMcastOctets\nIpExt: 0 0 0 0 0 0 2442656919 2056591362 0\n";
  assert.deepEqual(parseNetstatOctets(netstat), {
    receiveBytes: 2442656919,
    transmitBytes: 2056591362,
  });
  assert.throws(() => parseNetstatOctets("TcpExt: A\nTcpExt: 1\n"), SyntaxError);
});

Deno.test("parseResidentBytes() reads VmRSS in kB", () => {
  const status = "Name:\tdeno\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 40000 kB\n";
  assert.equal(parseResidentBytes(status), 51200 * 1024);
  assert.throws(() => parseResidentBytes("Name:\tdeno\n"), SyntaxError);
});

Deno.test("registerProcessMetrics() writes client_golang's families and the heap at each refresh", () => {
  const registry = new Registry();
  let cpuSeconds = 1.25;
  const metrics = registerProcessMetrics(registry, 1700000000.5, {
    stats: () => ({
      cpuSeconds,
      openFds: 17,
      maxFds: 1024,
      virtualMemoryBytes: 2_000_000_000,
      residentMemoryBytes: 50_000_000,
      virtualMemoryMaxBytes: UNLIMITED,
      network: { receiveBytes: 2_442_656_919, transmitBytes: 2_056_591_362 },
    }),
    memory: () => ({ heapUsed: 5_000_000, heapTotal: 8_000_000, external: 300_000 }),
  });
  metrics.refresh();
  const lines = registry.metricsText().split("\n");
  const family = (name: string, type: string, value: string) => [
    `# HELP ${name} ${PROCESS_METRIC_HELP[name]}`,
    `# TYPE ${name} ${type}`,
    `${name} ${value}`,
  ];
  assert.deepEqual(lines, [
    ...family("deno_heap_external_bytes", "gauge", "300000"),
    ...family("deno_heap_total_bytes", "gauge", "8000000"),
    ...family("deno_heap_used_bytes", "gauge", "5000000"),
    ...family("process_cpu_seconds_total", "counter", "1.25"),
    ...family("process_max_fds", "gauge", "1024"),
    ...family("process_network_receive_bytes_total", "counter", "2442656919"),
    ...family("process_network_transmit_bytes_total", "counter", "2056591362"),
    ...family("process_open_fds", "gauge", "17"),
    ...family("process_resident_memory_bytes", "gauge", "50000000"),
    ...family("process_start_time_seconds", "gauge", "1700000000.5"),
    ...family("process_virtual_memory_bytes", "gauge", "2000000000"),
    // An unlimited address space, read as the largest uint64 as procfs reads it (the Go sidecar
    // writes the same float64 as 1.8446744073709552e+19).
    ...family("process_virtual_memory_max_bytes", "gauge", "18446744073709552000"),
    "",
  ]);
  assert.equal(
    PROCESS_METRIC_HELP.process_cpu_seconds_total,
    "Total user and system CPU time spent in seconds.",
  );
  cpuSeconds = 2.5;
  metrics.refresh();
  assert.ok(registry.metricsText().includes("\nprocess_cpu_seconds_total 2.5\n"));
});

Deno.test("registerProcessMetrics() leaves the /proc families out where /proc cannot be read", () => {
  const registry = new Registry();
  registerProcessMetrics(registry, 1, {
    stats: () => undefined,
    memory: () => ({ heapUsed: 1, heapTotal: 2, external: 3 }),
  }).refresh();
  const names = registry.metricsText().split("\n").filter((l) => l.startsWith("# TYPE"))
    .map((l) => l.split(" ")[2]);
  assert.deepEqual(names, [
    "deno_heap_external_bytes",
    "deno_heap_total_bytes",
    "deno_heap_used_bytes",
    "process_start_time_seconds",
  ]);
});

Deno.test({
  name: "readProcessStats() reads plausible figures of this process from /proc/self",
  ignore: Deno.build.os !== "linux",
  fn() {
    const stats = readProcessStats();
    assert.ok(stats !== undefined);
    assert.ok(stats.cpuSeconds > 0 && stats.cpuSeconds < 1e6, `cpu ${stats.cpuSeconds}`);
    assert.ok(stats.openFds >= 3 && stats.openFds <= stats.maxFds, `fds ${stats.openFds}`);
    assert.ok(stats.residentMemoryBytes > 1024 * 1024, `rss ${stats.residentMemoryBytes}`);
    assert.ok(stats.virtualMemoryBytes >= stats.residentMemoryBytes);
    assert.ok(stats.virtualMemoryMaxBytes >= stats.virtualMemoryBytes);
    assert.ok(stats.network !== undefined && stats.network.receiveBytes >= 0);
    const rss = Deno.memoryUsage().rss;
    assert.ok(
      Math.abs(stats.residentMemoryBytes - rss) < rss / 2,
      `VmRSS ${stats.residentMemoryBytes} near the runtime's rss ${rss}`,
    );
  },
});
