/**
 * Our `/metrics` beside the Go csi-attacher's, both standbys of one driver (the Lease held by a
 * third replica), against the in-memory API server and the Kubernetes CSI mock driver:
 * `leader_election_master_status` is `{name=""} 0` in both, and every `process_*` family Go
 * serves is served by ours with the same type and help text.
 *
 * Needs the Go binary (`bench/build_go_attacher.ts`; `GO_ATTACHER`, else the end-to-end suite's
 * and the benchmark's caches) and the mock driver the end-to-end suite builds
 * (`~/.cache/csi-attacher-e2e/bin/mockdriver`, or `E2E_MOCKDRIVER`); skipped, saying so in its
 * name, without them. `deno task e2e` builds both, then
 * `deno test -A tests/processes/metrics_go_test.ts` runs it.
 */

import assert from "node:assert/strict";
import { DEFAULT_VERSION } from "../../bench/build_go_attacher.ts";
import { LEASES } from "../../lib/kube/api.ts";
import { leaseName } from "../../lib/leaderelection/config.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const HOME = Deno.env.get("HOME") ?? "/tmp";
/** The mock driver's name (`k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock`). */
const MOCK_DRIVER = "io.kubernetes.storage.mock";

function firstFile(paths: (string | undefined)[]): string | undefined {
  for (const path of paths) {
    if (path === undefined || path === "") continue;
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch {
      // not there
    }
  }
  return undefined;
}

const GO = firstFile([
  Deno.env.get("GO_ATTACHER"),
  `${HOME}/.cache/csi-attacher-e2e/bin/csi-attacher-${DEFAULT_VERSION}`,
  `${HOME}/.cache/csi-attacher-bench/bin/csi-attacher-${DEFAULT_VERSION}`,
]);
const MOCK = firstFile([
  Deno.env.get("E2E_MOCKDRIVER"),
  `${HOME}/.cache/csi-attacher-e2e/bin/mockdriver`,
]);

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** The families of a text exposition: name → its HELP, TYPE and sample lines. */
function families(text: string): Map<string, { help?: string; type?: string; samples: string[] }> {
  const out = new Map<string, { help?: string; type?: string; samples: string[] }>();
  const get = (name: string) => {
    let f = out.get(name);
    if (f === undefined) out.set(name, f = { samples: [] });
    return f;
  };
  for (const line of text.split("\n")) {
    const meta = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (meta !== null) {
      get(meta[2]!)[meta[1] === "HELP" ? "help" : "type"] = meta[3]!;
    } else if (line !== "" && !line.startsWith("#")) {
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0];
      get(name.replace(/_(bucket|sum|count)$/, "")).samples.push(line);
    }
  }
  return out;
}

/** Polls `/metrics` at `port` until `ready(text)`; fails after `ms`. */
async function scrape(port: number, ready: (text: string) => boolean, ms = 20_000) {
  const until = Date.now() + ms;
  let last = "";
  while (Date.now() < until) {
    try {
      last = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      if (ready(last)) return last;
    } catch {
      // not serving yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`/metrics at ${port} not ready in ${ms} ms:\n${last.slice(0, 2000)}`);
}

Deno.test({
  name: GO === undefined || MOCK === undefined
    ? "/metrics of a standby as the Go csi-attacher's (skipped: no Go binary or mock driver; " +
      "`deno task e2e` builds them)"
    : '/metrics of a standby as the Go csi-attacher\'s: leader_election_master_status{name=""} 0, ' +
      "the process_* families",
  ignore: GO === undefined || MOCK === undefined,
  async fn() {
    const server = await MemoryApiServer.start();
    const dir = await Deno.makeTempDir({ prefix: "metrics-go-test-" });
    const children: Deno.ChildProcess[] = [];
    try {
      await Deno.writeTextFile(`${dir}/kubeconfig`, server.kubeconfig());
      const now = new Date().toISOString().replace(/Z$/, "000Z");
      server.create(LEASES, {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: leaseName(MOCK_DRIVER), namespace: "default" },
        spec: {
          holderIdentity: "third",
          leaseDurationSeconds: 3600,
          acquireTime: now,
          renewTime: now,
        },
      });
      const socket = `${dir}/csi.sock`;
      children.push(
        new Deno.Command(MOCK!, { args: [`-endpoint=${socket}`], stdout: "null", stderr: "null" })
          .spawn(),
      );
      const flags = (port: number) => [
        `--kubeconfig=${dir}/kubeconfig`,
        `--csi-address=${socket}`,
        "--leader-election",
        "--leader-election-namespace=default",
        `--http-endpoint=127.0.0.1:${port}`,
      ];
      const goPort = freePort();
      const ourPort = freePort();
      children.push(
        new Deno.Command(GO!, { args: flags(goPort), stdout: "null", stderr: "null" }).spawn(),
        new Deno.Command(Deno.execPath(), {
          args: ["run", "-A", MAIN, ...flags(ourPort)],
          env: { HOSTNAME: "ours" },
          stdout: "null",
          stderr: "null",
        }).spawn(),
      );
      const standby = (text: string) => text.includes("\nleader_election_master_status{");
      const [goText, ourText] = await Promise.all([
        scrape(goPort, standby),
        scrape(ourPort, standby),
      ]);
      const go = families(goText);
      const ours = families(ourText);
      assert.deepEqual(go.get("leader_election_master_status")?.samples, [
        'leader_election_master_status{name=""} 0',
      ]);
      assert.deepEqual(
        ours.get("leader_election_master_status")?.samples,
        go.get("leader_election_master_status")?.samples,
      );
      const processFamilies = [...go.keys()].filter((n) => n.startsWith("process_"));
      assert.ok(
        processFamilies.includes("process_virtual_memory_max_bytes"),
        processFamilies.join(),
      );
      assert.ok(processFamilies.includes("process_network_receive_bytes_total"));
      for (const name of processFamilies) {
        const g = go.get(name)!;
        const o = ours.get(name);
        assert.ok(o !== undefined, `ours serves ${name}`);
        assert.equal(o.type, g.type, `TYPE of ${name}`);
        // component-base marks the start time [ALPHA] (its legacy registry wraps client_golang's).
        assert.equal(o.help?.replace(/^\[ALPHA\] /, ""), g.help?.replace(/^\[ALPHA\] /, ""));
        assert.equal(o.samples.length, 1, name);
      }
    } finally {
      for (const child of children) {
        try {
          child.kill("SIGKILL");
        } catch {
          // gone already
        }
        await child.status;
      }
      await server.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
