/**
 * The bundle (`deno task bundle`) is self-contained: its files copied alone into an empty directory and
 * run with an empty DENO_DIR, no npm resolution, no remote modules, no config and only the
 * permissions of the `compile` task, it attaches and detaches a volume against the in-memory
 * API server and the example CSI driver, with leader election and the HTTP endpoint on. This is
 * the same module graph `deno compile` embeds, which cannot be built here (it downloads its base
 * runtime from dl.deno.land).
 */

import assert from "node:assert/strict";
import { ExampleDriver } from "../../testkit/csi/example_driver.ts";
import { CSI_NODES, LEASES, PERSISTENT_VOLUMES, VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import { leaderIdentity } from "../../lib/leaderelection/config.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { finalizerName } from "../../lib/controller/names.ts";
import { leaseName } from "../../lib/leaderelection/config.ts";
import type { Lease, PersistentVolume, VolumeAttachment } from "../../lib/kube/types.ts";
import { imageEnvironment } from "../../bench/shipped_form.ts";
import { repositoryVersion, stampDir } from "../../deploy/build/stamp_version.ts";
import { BASE_VERSION } from "../../lib/version.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const TASKS: Record<string, string> = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks;
/** The environment the image sets (the Containerfile's `ENV`, `DENO_USE_CGROUPS=1` …). */
const IMAGE_ENV = Object.fromEntries(
  imageEnvironment(Deno.readTextFileSync(`${ROOT}Containerfile`)),
);

/** Upper bound of the whole bundle test; it normally takes a few seconds. */
const GUARD_MS = 180_000;

/** The permission flags of a task command's last step (the compile task's `deno compile`). */
function permissionFlags(task: string | undefined): string[] {
  assert.ok(task, "task defined in deno.json");
  return task.split("&&").at(-1)!.split(/\s+/).filter((arg) =>
    arg === "-A" || arg.startsWith("--allow-") || arg.startsWith("--deny-")
  );
}

/** The `--v8-flags=…` of a task command (the heap settings the binary has built in). */
function v8Flags(task: string | undefined): string[] {
  assert.ok(task, "task defined in deno.json");
  return task.split(/\s+/).filter((arg) => arg.startsWith("--v8-flags="));
}

/** Whether this Deno has `deno bundle` at all. */
function bundleAvailable(): boolean {
  const { success } = new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--help"],
    stdout: "null",
    stderr: "null",
  }).outputSync();
  return success;
}

const BUNDLE_AVAILABLE = bundleAvailable();
if (!BUNDLE_AVAILABLE) {
  console.log("bundle_test: skipped, this Deno has no `deno bundle` subcommand");
}

Deno.test("compile and demo tasks use one permission list, without -A", () => {
  const compile = permissionFlags(TASKS.compile);
  assert.deepEqual(permissionFlags(TASKS.demo), compile);
  assert.ok(!compile.includes("-A") && !compile.includes("--allow-all"));
  assert.ok(!compile.some((f) => /^--allow-(run|ffi|import)/.test(f)), compile.join(" "));
  assert.ok(compile.includes("--allow-sys=hostname"), "leader election identity");
});

Deno.test("compile, dev and demo tasks use the same V8 heap flags", () => {
  const flags = v8Flags(TASKS.compile);
  assert.equal(flags.length, 1, "the compile task bakes V8 flags into the binary");
  assert.deepEqual(v8Flags(TASKS.dev), flags);
  assert.deepEqual(v8Flags(TASKS.demo), flags);
});

/**
 * The arguments (without `deno`) of a bundle command: the `bundle` task's, or the release bundle
 * the `compile` task compiles (its first step, minified).
 */
function bundleCommand(kind: "bundle" | "release"): string[] {
  const command = (kind === "bundle" ? TASKS.bundle! : TASKS.compile!).split("&&")[0]!;
  return command.trim().split(/\s+/).slice(1);
}

/** Builds the bundle with the task's own command (see {@link bundleCommand}) into `outdir`. */
async function buildBundle(
  outdir: string,
  signal?: AbortSignal,
  kind: "bundle" | "release" = "bundle",
): Promise<void> {
  const bundleArgs = bundleCommand(kind);
  const outIndex = bundleArgs.indexOf("--outdir") + 1;
  assert.ok(outIndex > 0, "the bundle task names its --outdir");
  bundleArgs[outIndex] = outdir;
  const built = await new Deno.Command(Deno.execPath(), {
    args: bundleArgs,
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    signal,
  }).output();
  assert.ok(built.success, `deno bundle failed:\n${new TextDecoder().decode(built.stderr)}`);
}

/** Where this file's bundles are built, once per kind; removed when the module unloads. */
let buildRoot: string | undefined;
const builds = new Map<"bundle" | "release", Promise<string>>();
addEventListener("unload", () => {
  if (buildRoot !== undefined) Deno.removeSync(buildRoot, { recursive: true });
});

/**
 * The directory holding the `kind` bundle, built by the first test that needs it: the tests only
 * read it, so one build serves them all.
 */
function builtBundle(kind: "bundle" | "release", signal?: AbortSignal): Promise<string> {
  let dir = builds.get(kind);
  if (dir === undefined) {
    dir = (async () => {
      buildRoot ??= await Deno.makeTempDir({ prefix: "bundle-build-test-" });
      const outdir = `${buildRoot}/${kind}`;
      await buildBundle(outdir, signal, kind);
      return outdir;
    })();
    builds.set(kind, dir);
  }
  return dir;
}

/** The files `entry` imports statically (`import … from "./x.js"`), transitively, with it. */
async function staticClosure(dir: string, entry: string): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    const text = await Deno.readTextFile(`${dir}/${file}`);
    seen.set(file, text);
    // Static imports only: `import(…)` of a chunk is what is read on demand.
    for (const m of text.matchAll(/^(?:import|export)\b[^;(]*?from\s*"\.\/([^"]+)"/gm)) {
      todo.push(m[1]!);
    }
    for (const m of text.matchAll(/^import\s*"\.\/([^"]+)"/gm)) todo.push(m[1]!);
  }
  return seen;
}

Deno.test({
  name: "the bundle's start loads no npm package: they are in chunks read only by a dynamic " +
    "import (the sandbox with grpc-js, client-node for exec kubeconfigs)",
  ignore: !BUNDLE_AVAILABLE,
  fn: async () => {
    const dir = await builtBundle("bundle");
    const closure = await staticClosure(dir, "main.js");
    const all = await filesUnder(dir);
    assert.ok(closure.size < all.length, `some chunks are loaded on demand: ${all}`);
    for (const [file, text] of closure) {
      const npm = text.match(/^\/\/ .*registry\.npmjs\.org\/(@[^/]+\/[^/]+|[^/]+)\//m);
      assert.equal(npm, null, `${file}, loaded at start, holds npm package ${npm?.[1]}`);
    }
    // The dynamically imported code is there, in the other chunks.
    const rest = await Promise.all(
      all.filter((f) => !closure.has(f)).map((f) => Deno.readTextFile(`${dir}/${f}`)),
    );
    assert.ok(rest.some((t) => t.includes("@kubernetes/client-node")), "client-node chunk");
  },
});

Deno.test({
  name: "the bundle and compile tasks stamp the repository's version: --version of two builds",
  ignore: !BUNDLE_AVAILABLE,
  fn: async () => {
    for (const task of [TASKS.bundle!, TASKS.compile!]) {
      assert.match(
        task,
        / && deno run [^&]* deploy\/build\/stamp_version\.ts dist\/(bundle|release)( |$)/,
      );
    }
    const built = await builtBundle("bundle");
    const version = async (dir: string) => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: ["run", "--no-prompt", "--allow-env", "--allow-read", `${dir}/main.js`, "--version"],
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      return new TextDecoder().decode(out.stdout).trim();
    };
    // Two builds: the repository's version, and one given as a container build gives it.
    const stamped = [];
    for (const given of [await repositoryVersion(ROOT), "v9.8.7"]) {
      assert.ok(given !== undefined, "this checkout is a git repository");
      const dir = await Deno.makeTempDir({ prefix: "stamped-bundle-" });
      try {
        await Deno.copyFile(`${built}/main.js`, `${dir}/main.js`);
        for (const f of await filesUnder(built)) {
          if (f.includes("/")) {
            await Deno.mkdir(`${dir}/${f.slice(0, f.lastIndexOf("/"))}`, {
              recursive: true,
            });
          }
          await Deno.copyFile(`${built}/${f}`, `${dir}/${f}`);
        }
        assert.equal(await version(dir), `csi-attacher ${BASE_VERSION}-dev`, "before the stamp");
        assert.ok(await stampDir(dir, given) >= 1);
        stamped.push(await version(dir));
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }
    assert.match(stamped[0]!, /^csi-attacher v\d+\.\d+\.\d+-(\d+-)?g[0-9a-f]{7,}(-dirty)?$/);
    assert.equal(stamped[1], "csi-attacher v9.8.7");
  },
});

/** Resolves with the first non-undefined `check()` result, checked on every server change. */
function waitFor<T>(
  server: MemoryApiServer,
  what: string,
  check: () => T | undefined,
  signal: AbortSignal,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const finish = (fn: () => void) => {
      unsubscribe();
      signal.removeEventListener("abort", onAbort);
      fn();
    };
    const onAbort = () => finish(() => reject(new Error(`timed out waiting until ${what}`)));
    const probe = () => {
      const value = check();
      if (value !== undefined) finish(() => resolve(value));
    };
    const unsubscribe = server.onEvent(probe);
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
    else probe();
  });
}

/** Kills `child` unless it has exited already (then `kill` throws a TypeError). */
function killIfRunning(child: Deno.ChildProcess): void {
  try {
    child.kill("SIGKILL");
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
}

/** Every file under `dir`, as paths relative to it. */
async function filesUnder(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = `${prefix}${entry.name}`;
    if (entry.isDirectory) out.push(...await filesUnder(`${dir}/${entry.name}`, `${path}/`));
    else out.push(path);
  }
  return out.sort();
}

for (const kind of ["bundle", "release"] as const) {
  Deno.test({
    name: `the ${
      kind === "bundle" ? "bundle" : "release bundle (compile task)"
    } runs alone with an empty DENO_DIR and the compile permissions: attach, detach`,
    ignore: !BUNDLE_AVAILABLE,
    fn: () => runsAlone(kind),
  });
}

/** Builds the `kind` bundle, runs it alone against the fakes, attaches and detaches. */
async function runsAlone(kind: "bundle" | "release"): Promise<void> {
  const guard = new AbortController();
  const guardTimer = setTimeout(() => guard.abort(), GUARD_MS);
  const tmp = await Deno.makeTempDir({ prefix: "bundle-test-" });
  const runDir = `${tmp}/run`;
  const denoDir = `${tmp}/deno-dir`;
  const workDir = `${tmp}/work`;
  await Promise.all([runDir, denoDir, workDir].map((d) => Deno.mkdir(d)));
  let child: Deno.ChildProcess | undefined;
  let output: Promise<[string, string]> | undefined;
  await using server = await MemoryApiServer.start();
  const example = new ExampleDriver({}, { nodeIds: ["node-1-id"] });
  example.createVolume("vol-1");
  const driver = await example.start(`${workDir}/csi.sock`);
  try {
    // 1. Build with the task's own command (once per kind for this file), copy the files alone.
    const buildDir = await builtBundle(kind, guard.signal);
    const builtFiles = await filesUnder(buildDir);
    assert.ok(builtFiles.includes("main.js"), `the entry is main.js: ${builtFiles}`);
    for (const file of builtFiles) {
      await Deno.copyFile(`${buildDir}/${file}`, `${runDir}/${file}`);
    }

    // 2. The objects a cluster would have.
    await Deno.writeTextFile(`${workDir}/kubeconfig`, server.kubeconfig());
    const driverName = example.name;
    server.create<PersistentVolume>(PERSISTENT_VOLUMES, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv-1" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        csi: { driver: driverName, volumeHandle: "vol-1" },
      },
    });
    server.create(CSI_NODES, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "node-1" },
      spec: { drivers: [{ name: driverName, nodeID: "node-1-id" }] },
    });
    server.create<VolumeAttachment>(VOLUME_ATTACHMENTS, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va-1" },
      spec: {
        attacher: driverName,
        nodeName: "node-1",
        source: { persistentVolumeName: "pv-1" },
      },
    });
    const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const httpPort = probe.addr.port;
    probe.close();

    // 3. Run the bundle alone: nothing cached, no npm, no config, a clean environment (the
    // release bundle with the image's).
    child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-config",
        "--no-lock",
        "--no-npm",
        "--no-remote",
        "--cached-only",
        "--no-prompt",
        ...permissionFlags(TASKS.compile),
        ...v8Flags(TASKS.compile),
        "main.js",
        `--kubeconfig=${workDir}/kubeconfig`,
        `--csi-address=${workDir}/csi.sock`,
        "--leader-election",
        `--http-endpoint=127.0.0.1:${httpPort}`,
        "--v=5",
      ],
      cwd: runDir,
      clearEnv: true,
      env: {
        ...(kind === "release" ? IMAGE_ENV : {}),
        DENO_DIR: denoDir,
        NO_COLOR: "1",
        POD_NAMESPACE: "default",
      },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    output = Promise.all([
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
    ]);
    const exited = new AbortController();
    child.status.finally(() => exited.abort());
    const signal = AbortSignal.any([guard.signal, exited.signal]);

    // 4. Attach.
    const attached = await waitFor(
      server,
      "va-1 is attached",
      () => {
        const va = server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va-1");
        return va?.status?.attached === true ? va : undefined;
      },
      signal,
    );
    assert.deepEqual(attached.status?.attachmentMetadata, { devicePath: "/dev/example/vol-1" });
    assert.deepEqual(attached.metadata.finalizers, [finalizerName(driverName)]);
    assert.equal(attached.metadata.annotations?.["csi.alpha.kubernetes.io/node-id"], "node-1-id");
    assert.ok(example.isPublished("vol-1", "node-1-id"));
    const lease = server.get<Lease>(LEASES, leaseName(driverName), "default");
    assert.equal(lease.spec.holderIdentity, leaderIdentity(Deno.hostname()));
    const health = await fetch(`http://127.0.0.1:${httpPort}/healthz/leader-election`, {
      signal,
    });
    assert.equal(health.status, 200);
    assert.equal(await health.text(), "ok");

    // 5. Detach and release.
    server.delete(VOLUME_ATTACHMENTS, "va-1");
    await waitFor(
      server,
      "va-1 is gone",
      () => server.find(VOLUME_ATTACHMENTS, "va-1") === undefined ? true : undefined,
      signal,
    );
    assert.deepEqual(example.publications(), []);
    server.delete(PERSISTENT_VOLUMES, "pv-1");
    await waitFor(
      server,
      "pv-1 is gone",
      () => server.find(PERSISTENT_VOLUMES, "pv-1") === undefined ? true : undefined,
      signal,
    );

    // 6. SIGTERM: a clean exit that hands the lease back.
    child.kill("SIGTERM");
    const status = await child.status;
    const [, stderr] = await output;
    assert.equal(status.code, 0, `exit status; log:\n${stderr}`);
    assert.doesNotMatch(stderr, /NotCapable|Requires .* access/);
    assert.match(stderr, /"GRPC call" method="\/csi\.v1\.Controller\/ControllerPublishVolume"/);
    const released = server.get<Lease>(LEASES, leaseName(driverName), "default");
    assert.equal(released.spec.holderIdentity, "");

    // 7. Nothing was fetched or installed to run it.
    assert.deepEqual(await filesUnder(runDir), builtFiles);
    const cached = await filesUnder(denoDir);
    assert.deepEqual(cached.filter((f) => f.startsWith("npm/") || f.startsWith("remote/")), []);
  } finally {
    clearTimeout(guardTimer);
    if (child !== undefined) {
      killIfRunning(child);
      await child.status;
      await output;
    }
    await driver.close();
    await Deno.remove(tmp, { recursive: true });
  }
}
