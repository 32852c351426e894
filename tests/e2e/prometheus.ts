/**
 * A real Prometheus server for the suite (Debian's `prometheus` package, `apt-get install
 * prometheus`): started on loopback with a generated configuration that scrapes the given targets
 * every second and evaluates the given rule file every second, stopped by
 * {@link PrometheusServer.stop} (and with the test runner, like every process of the suite). Its
 * HTTP API (`/api/v1/query`, `/api/v1/query_range`, `/api/v1/alerts`) is read with `fetch`.
 *
 * @module
 */

import { ManagedProcess } from "./process.ts";

/** Options of {@link PrometheusServer.start}. */
export interface PrometheusOptions {
  /** A directory of its own: configuration, rules, data and log. */
  dir: string;
  /** The rule file's text. */
  rules: string;
  /** The scrape job's name. */
  job: string;
  /** `host:port` targets of the job, scraped at `/metrics`. */
  targets: readonly string[];
  /**
   * Target labels, as the Prometheus Operator's PodMonitor sets them from the pod (`container`,
   * `namespace`, `pod`).
   */
  labels?: Record<string, string>;
  /** Kill it once this process is gone. */
  ownerPid?: number;
  /** The program; default `prometheus` on the PATH. */
  binary?: string;
}

/** One series of an instant or range query. */
export interface QuerySeries {
  metric: Record<string, string>;
  /** Instant queries: one value. */
  value?: [number, string];
  /** Range queries: every value. */
  values?: [number, string][];
}

/** An active alert as `/api/v1/alerts` lists it. */
export interface ActiveAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing";
  activeAt: string;
  value: string;
}

/** Whether a program runs here (`<binary> --version` succeeds). */
export function hasProgram(binary: string): boolean {
  try {
    return new Deno.Command(binary, { args: ["--version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** A running Prometheus. */
export class PrometheusServer {
  readonly url: string;
  readonly process: ManagedProcess;

  private constructor(url: string, process: ManagedProcess) {
    this.url = url;
    this.process = process;
  }

  /**
   * Writes the configuration and starts Prometheus; resolves once `/-/ready` answers 200 (at most
   * 30 s, else it is stopped and this throws with its log's tail).
   */
  static async start(options: PrometheusOptions): Promise<PrometheusServer> {
    const binary = options.binary ?? "prometheus";
    if (!hasProgram(binary)) {
      throw new Error(`${binary} is not on the PATH: apt-get install prometheus`);
    }
    await Deno.mkdir(`${options.dir}/data`, { recursive: true });
    await Deno.writeTextFile(`${options.dir}/rules.yaml`, options.rules);
    await Deno.writeTextFile(
      `${options.dir}/prometheus.yaml`,
      [
        "global:",
        "  scrape_interval: 1s",
        "  scrape_timeout: 1s",
        "  evaluation_interval: 1s",
        "rule_files:",
        `  - ${options.dir}/rules.yaml`,
        "scrape_configs:",
        `  - job_name: ${options.job}`,
        "    static_configs:",
        `      - targets: [${options.targets.map((t) => JSON.stringify(t)).join(", ")}]`,
        ...(options.labels === undefined
          ? []
          : [`        labels: ${JSON.stringify(options.labels)}`]),
        "",
      ].join("\n"),
    );
    const port = freePort();
    const process = ManagedProcess.start({
      name: "prometheus",
      cmd: binary,
      args: [
        `--config.file=${options.dir}/prometheus.yaml`,
        `--storage.tsdb.path=${options.dir}/data`,
        "--storage.tsdb.retention.time=1h",
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      logFile: `${options.dir}/prometheus.log`,
      ownerPid: options.ownerPid,
    });
    const server = new PrometheusServer(`http://127.0.0.1:${port}`, process);
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const res = await fetch(`${server.url}/-/ready`);
        await res.body?.cancel();
        if (res.status === 200) return server;
      } catch {
        // Not listening yet.
      }
      if (process.exitStatus !== undefined || Date.now() > deadline) {
        const tail = await process.tail();
        await process.stop(5_000);
        throw new Error(`Prometheus did not become ready:\n${tail}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async #api<T>(path: string, params: Record<string, string>): Promise<T> {
    const res = await fetch(`${this.url}${path}`, {
      method: "POST",
      body: new URLSearchParams(params),
    });
    const body = await res.json() as { status: string; data: T; error?: string };
    if (res.status !== 200 || body.status !== "success") {
      throw new Error(
        `Prometheus ${path} ${JSON.stringify(params)}: HTTP ${res.status} ${body.error}`,
      );
    }
    return body.data;
  }

  /** An instant query; throws on an error answer (a bad expression among them). */
  async query(expr: string): Promise<QuerySeries[]> {
    const data = await this.#api<{ resultType: string; result: QuerySeries[] }>(
      "/api/v1/query",
      { query: expr },
    );
    return data.resultType === "vector" || data.resultType === "matrix" ? data.result : [];
  }

  /** A range query from `startMs` to `endMs`; throws on an error answer. */
  async queryRange(
    expr: string,
    startMs: number,
    endMs: number,
    stepSeconds: number,
  ): Promise<QuerySeries[]> {
    const data = await this.#api<{ result: QuerySeries[] }>("/api/v1/query_range", {
      query: expr,
      start: String(startMs / 1000),
      end: String(endMs / 1000),
      step: String(stepSeconds),
    });
    return data.result;
  }

  /** The alerts pending or firing now. */
  async alerts(): Promise<ActiveAlert[]> {
    const res = await fetch(`${this.url}/api/v1/alerts`);
    const body = await res.json() as { data: { alerts: ActiveAlert[] } };
    return body.data.alerts;
  }

  /** Stops it (SIGTERM, SIGKILL after 10 s). */
  async stop(): Promise<void> {
    await this.process.stop(10_000);
  }
}
