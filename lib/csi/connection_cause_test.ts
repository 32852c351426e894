/**
 * The dial's cause reaches the first log line and the final error of {@link connect}: a socket
 * the process may not open, a path that is not a socket, no such path, nobody listening.
 */

import assert from "node:assert/strict";
import { connect } from "./connection.ts";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";

const PROBE = new URL("../../testkit/csi/connect_probe.ts", import.meta.url).pathname;
/** The user the image runs as (Containerfile), and nobody's on Debian. */
const NOBODY = 65534;

async function tempDir(): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix: "csi_connection_cause_test" });
  await Deno.chmod(path, 0o755);
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

/**
 * Connects with a 400 ms timeout on a fake clock: once the first attempt has failed (real I/O)
 * and waits its backoff, the clock moves to the timeout. Returns the log lines and the final
 * error's text.
 */
async function failedConnect(address: string): Promise<{ log: FakeLogger; final: string }> {
  const log = new FakeLogger(0);
  const clock = new FakeClock();
  const pending = connect(address, {
    log,
    clock,
    timeoutMs: 400,
    reconnectBackoffMs: 100,
  }).then(
    (client) => {
      client.close();
      throw new Error("connected");
    },
    (err: Error) => err,
  );
  // Pending while the first attempt waits its backoff: the timeout, the log ticker, the retry.
  for (let i = 0; i < 1000 && clock.pendingTimers() < 3; i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  clock.advance(400);
  const err = await pending;
  return { log, final: err.message };
}

function assertCause(log: FakeLogger, final: string, cause: string): void {
  const first = log.lines[0];
  assert.ok(first !== undefined, "nothing logged");
  assert.equal(first.msg, "Failed to connect to CSI driver, retrying");
  assert.equal(first.fields.err, cause);
  assert.match(final, /^timed out after 0\.4s waiting to connect to the CSI driver at /);
  assert.ok(final.endsWith(`: last error: ${cause}`), final);
}

Deno.test("connect() names a missing socket: no such file or directory", async () => {
  await using dir = await tempDir();
  const path = `${dir.path}/csi.sock`;
  const { log, final } = await failedConnect(path);
  assertCause(log, final, `dial unix ${path}: connect: no such file or directory`);
});

Deno.test("connect() names a socket nobody listens on: connection refused", async () => {
  await using dir = await tempDir();
  const path = `${dir.path}/csi.sock`;
  // A socket file left behind by a driver that exited without removing it.
  const listener = Deno.listen({ transport: "unix", path });
  listener.close();
  const info = await Deno.lstat(path).catch(() => undefined);
  if (info === undefined) {
    // Deno removed the socket on close: bind again from a child that exits without unlinking.
    const child = new Deno.Command("python3", {
      args: ["-c", `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(path)})`],
    });
    assert.equal((await child.output()).code, 0);
  }
  assert.ok((await Deno.lstat(path)).isSocket);
  const { log, final } = await failedConnect(path);
  assertCause(log, final, `dial unix ${path}: connect: connection refused`);
});

Deno.test("connect() names a path that is a regular file or a directory, not a socket", async () => {
  await using dir = await tempDir();
  const file = `${dir.path}/file.sock`;
  await Deno.writeTextFile(file, "");
  const folder = `${dir.path}/dir.sock`;
  await Deno.mkdir(folder);
  for (const [path, kind] of [[file, "a regular file"], [folder, "a directory"]]) {
    const { log, final } = await failedConnect(`unix://${path}`);
    assertCause(
      log,
      final,
      `dial unix ${path}: connect: connection refused (${path} is ${kind}, not a socket)`,
    );
  }
});

Deno.test("connect() names a socket the process may not open: permission denied", async () => {
  await using dir = await tempDir();
  const path = `${dir.path}/csi.sock`;
  // A driver's socket as most drivers make it: owned by root (here: by this test), mode 0755,
  // listening. Root may open anything, so as root the probe runs as the image's user instead.
  const listener = Deno.listen({ transport: "unix", path });
  try {
    await Deno.chmod(path, Deno.uid() === 0 ? 0o755 : 0o555);
    const asOther = Deno.uid() === 0
      ? ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"]
      : [];
    const denoDir = `${dir.path}/deno_dir`;
    await Deno.mkdir(denoDir);
    if (Deno.uid() === 0) await Deno.chown(denoDir, NOBODY, NOBODY);
    const command = [...asOther, Deno.execPath(), "run", "--no-config", "--no-lock", "--allow-all"];
    const out = await new Deno.Command(command[0]!, {
      args: [...command.slice(1), PROBE, path, "400"],
      env: { DENO_DIR: denoDir, NO_COLOR: "1" },
      stderr: "inherit",
    }).output();
    assert.equal(out.code, 0);
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l));
    const cause = `dial unix ${path}: connect: permission denied`;
    // The first line at the default verbosity names the cause and what to do.
    assert.equal(lines[0].msg, "Failed to connect to CSI driver, retrying");
    assert.equal(lines[0].err, cause);
    assert.match(lines[0].hint, /securityContext\.runAsUser/);
    const final = lines.at(-1).final as string;
    assert.match(final, /^timed out after 0\.4s waiting to connect to the CSI driver at /);
    assert.ok(final.endsWith(`: last error: ${cause}`), final);
  } finally {
    listener.close();
  }
});
