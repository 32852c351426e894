/**
 * Runs the example CSI driver as its own process, for tests that must kill a driver the way a
 * crash does (the kernel closes its sockets; no HTTP/2 GOAWAY is sent).
 *
 * Usage: `deno run -A tests/example_driver_process.ts <socket> [volume-id...]`; prints
 * `listening` once it serves.
 */

import { ExampleDriver } from "./example_driver.ts";

if (import.meta.main) {
  const [socket, ...volumes] = Deno.args;
  if (!socket) {
    console.error("usage: example_driver_process.ts <socket> [volume-id...]");
    Deno.exit(2);
  }
  const driver = new ExampleDriver();
  for (const id of volumes) driver.createVolume(id);
  await driver.start(socket);
  console.log("listening");
}

/** Starts the driver process and waits until it serves on `socket`. */
export async function spawnExampleDriver(
  socket: string,
  volumes: string[],
): Promise<Deno.ChildProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, socket, ...volumes],
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  const first = await reader.read();
  reader.releaseLock();
  await child.stdout.cancel();
  if (!new TextDecoder().decode(first.value).includes("listening")) {
    child.kill("SIGKILL");
    await child.status;
    throw new Error("example driver did not start");
  }
  return child;
}
