/**
 * Runs the example CSI driver as its own process, for tests that must kill a driver the way a
 * crash does (the kernel closes its sockets; no HTTP/2 GOAWAY is sent).
 *
 * Usage: `deno run -A testkit/csi/example_driver_process.ts [--publish-delay-ms=N |
 * --publish-hold] <socket> [volume-id...]`; prints `listening` once it serves. With a publish
 * delay each ControllerPublishVolume waits N ms before it answers (a slow driver); with
 * `--publish-hold` each one waits until a line arrives on stdin (the test releases them all at
 * once; later ones answer at once). With either, the driver prints `publish <volume-id>` when
 * each one starts.
 *
 * @module
 */

import { ExampleDriver } from "./example_driver.ts";
import { startCsiDriverServer } from "./server.ts";

const DELAY_FLAG = "--publish-delay-ms=";
const HOLD_FLAG = "--publish-hold";

/** Resolves when the first line (or the end) arrives on stdin. */
async function firstStdinLine(): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of Deno.stdin.readable) {
    if (decoder.decode(chunk).includes("\n")) return;
  }
}

if (import.meta.main) {
  const args = [...Deno.args];
  let publishDelayMs: number | undefined;
  let held: Promise<void> | undefined;
  if (args[0] === HOLD_FLAG) {
    args.shift();
    held = firstStdinLine();
    publishDelayMs = 0;
  } else if (args[0]?.startsWith(DELAY_FLAG)) {
    publishDelayMs = Number(args.shift()!.slice(DELAY_FLAG.length));
    if (!Number.isFinite(publishDelayMs) || publishDelayMs < 0) {
      console.error(`${DELAY_FLAG}: not a non-negative number`);
      Deno.exit(2);
    }
  }
  const [socket, ...volumes] = args;
  if (!socket) {
    console.error(
      `usage: example_driver_process.ts [${DELAY_FLAG}N | ${HOLD_FLAG}] <socket> [volume-id...]`,
    );
    Deno.exit(2);
  }
  const driver = new ExampleDriver();
  for (const id of volumes) driver.createVolume(id);
  if (publishDelayMs === undefined) {
    await driver.start(socket);
  } else {
    const delayMs = publishDelayMs;
    const controller = driver.controllerHandlers();
    await startCsiDriverServer({
      address: socket,
      identity: driver.identityHandlers(),
      controller: {
        ...controller,
        controllerPublishVolume: async (req) => {
          console.log(`publish ${req.volumeId}`);
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          await held;
          return driver.publish(req);
        },
      },
    });
  }
  console.log("listening");
}

/** Options of {@link spawnExampleDriver}. */
export interface SpawnExampleDriverOptions {
  /** Each ControllerPublishVolume waits this long before it answers. */
  publishDelayMs?: number;
  /**
   * Each ControllerPublishVolume waits until {@link releasePublishes} (instead of a delay); the
   * driver's stdin is then a pipe.
   */
  holdPublishes?: boolean;
  /** Called with each line the driver prints after `listening` (with a publish delay: calls). */
  onLine?: (line: string) => void;
}

/** Starts the driver process and waits until it serves on `socket`. */
export async function spawnExampleDriver(
  socket: string,
  volumes: string[],
  options: SpawnExampleDriverOptions = {},
): Promise<Deno.ChildProcess> {
  const flags = options.holdPublishes
    ? [HOLD_FLAG]
    : options.publishDelayMs === undefined
    ? []
    : [`${DELAY_FLAG}${options.publishDelayMs}`];
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL(import.meta.url).pathname, ...flags, socket, ...volumes],
    stdin: options.holdPublishes ? "piped" : "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines());
  const reader = lines.getReader();
  const first = await reader.read();
  if (first.value !== "listening") {
    await reader.cancel();
    child.kill("SIGKILL");
    await child.status;
    throw new Error("example driver did not start");
  }
  if (options.onLine === undefined) {
    await reader.cancel();
  } else {
    const onLine = options.onLine;
    (async () => {
      for (;;) {
        const next = await reader.read();
        if (next.done) return;
        onLine(next.value);
      }
    })().catch(() => {});
  }
  return child;
}

/**
 * Lets every ControllerPublishVolume held by a driver started with `holdPublishes` answer, and
 * every later one answer at once.
 */
export async function releasePublishes(driver: Deno.ChildProcess): Promise<void> {
  const writer = driver.stdin.getWriter();
  await writer.write(new TextEncoder().encode("release\n"));
  await writer.close();
}

function splitLines(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(text, controller) {
      rest += text;
      let newline = rest.indexOf("\n");
      while (newline >= 0) {
        controller.enqueue(rest.slice(0, newline));
        rest = rest.slice(newline + 1);
        newline = rest.indexOf("\n");
      }
    },
    flush(controller) {
      if (rest !== "") controller.enqueue(rest);
    },
  });
}
