/**
 * The benchmark environment with no cluster: the in-memory API server and the example CSI driver,
 * each in its own process, so that neither's CPU or memory is counted in the attacher's and the
 * three do not share an event loop.
 *
 * @module
 */

import type { FixtureSpec } from "./fixtures.ts";
import type { BenchEnvironment, LeaseHolderChange, WatchListSent } from "./environment.ts";
import type { RequestCounts } from "./request_counts.ts";
import type { TimelineReport, WaitAnswer, WaitTarget } from "./timeline.ts";
import { HelperProcess } from "./helper_process.ts";

const API_SERVER_SCRIPT = new URL("./fake_apiserver_process.ts", import.meta.url).pathname;
const DRIVER_SCRIPT = new URL("./fake_driver_process.ts", import.meta.url).pathname;

/** Parses the helpers' JSON, where `null` stands for a NaN number. */
function parseJson<T>(text: string): T {
  return JSON.parse(text, (_k, v) => (v === null ? NaN : v)) as T;
}

async function call<T>(base: string, method: string, path: string): Promise<T> {
  const res = await fetch(`${base}${path}`, { method });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} failed: ${res.status} ${text}`);
  return parseJson<T>(text);
}

/** {@link BenchEnvironment} on the fakes. Create with {@link FakeEnvironment.start}. */
export class FakeEnvironment implements BenchEnvironment {
  readonly description = "fake (MemoryApiServer and ExampleDriver, one process each)";
  readonly spec: FixtureSpec;
  readonly kubeconfigPath: string;
  readonly csiAddress: string;
  readonly #dir: string;
  readonly #apiServer: HelperProcess;
  readonly #driver: HelperProcess;
  readonly #apiControl: string;
  readonly #driverControl: string;

  /** Use {@link FakeEnvironment.start}. */
  constructor(
    deps: { apiServer: HelperProcess; driver: HelperProcess },
    options: {
      spec: FixtureSpec;
      dir: string;
      kubeconfigPath: string;
      csiAddress: string;
      apiControl: string;
      driverControl: string;
    },
  ) {
    this.#apiServer = deps.apiServer;
    this.#driver = deps.driver;
    this.spec = options.spec;
    this.#dir = options.dir;
    this.kubeconfigPath = options.kubeconfigPath;
    this.csiAddress = options.csiAddress;
    this.#apiControl = options.apiControl;
    this.#driverControl = options.driverControl;
  }

  /** Starts both helpers with the objects of `spec` and writes the kubeconfig. */
  static async start(spec: FixtureSpec): Promise<FakeEnvironment> {
    const dir = await Deno.makeTempDir({ prefix: "attacher-bench-" });
    const csiAddress = `${dir}/csi.sock`;
    const started: HelperProcess[] = [];
    try {
      const api = await HelperProcess.start("fake API server", API_SERVER_SCRIPT, [
        JSON.stringify(spec),
      ]);
      started.push(api.process);
      const driver = await HelperProcess.start("fake CSI driver", DRIVER_SCRIPT, [
        JSON.stringify(spec),
        csiAddress,
      ]);
      started.push(driver.process);
      const apiControl = api.ready.control as string;
      const kubeconfigPath = `${dir}/kubeconfig`;
      const kubeconfig = await (await fetch(`${apiControl}/kubeconfig`)).text();
      await Deno.writeTextFile(kubeconfigPath, kubeconfig);
      return new FakeEnvironment({ apiServer: api.process, driver: driver.process }, {
        spec,
        dir,
        kubeconfigPath,
        csiAddress,
        apiControl,
        driverControl: driver.ready.control as string,
      });
    } catch (err) {
      for (const p of started) await p.stop();
      await Deno.remove(dir, { recursive: true });
      throw err;
    }
  }

  async createCanary(): Promise<void> {
    await call(this.#apiControl, "POST", "/canary");
  }

  async startAttach(): Promise<void> {
    await call(this.#apiControl, "POST", "/attach");
  }

  async startDetach(): Promise<void> {
    await call(this.#apiControl, "POST", "/detach");
  }

  async createFloodProbe(): Promise<void> {
    await call(this.#apiControl, "POST", "/flood");
  }

  wait(target: WaitTarget, timeoutMs: number): Promise<WaitAnswer> {
    return call(this.#apiControl, "GET", `/wait?for=${target}&timeoutMs=${Math.round(timeoutMs)}`);
  }

  takeRequests(): Promise<RequestCounts> {
    return call(this.#apiControl, "POST", "/requests/take");
  }

  takeCsiCalls(): Promise<Record<string, number>> {
    return call(this.#driverControl, "POST", "/calls/reset");
  }

  leaseHolders(): Promise<LeaseHolderChange[]> {
    return call(this.#apiControl, "GET", "/leases");
  }

  watchListsSent(): Promise<WatchListSent[]> {
    return call(this.#apiControl, "GET", "/watchlists");
  }

  timeline(): Promise<TimelineReport> {
    return call(this.#apiControl, "GET", "/timeline");
  }

  helperPids(): Record<string, number> {
    return { apiServer: this.#apiServer.pid, driver: this.#driver.pid };
  }

  async close(): Promise<void> {
    await this.#apiServer.stop();
    await this.#driver.stop();
    await Deno.remove(this.#dir, { recursive: true });
  }
}
