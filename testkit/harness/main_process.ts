/**
 * `main.ts` as a child process for the process tests and the soak benchmark: started with
 * `deno run -A` and the given flags, its stdout and stderr collected into one log.
 *
 * @module
 */

/** The attacher's entry point. */
export const MAIN_TS = new URL("../../main.ts", import.meta.url).pathname;

/** A running `main.ts`. */
export interface MainProcess {
  readonly child: Deno.ChildProcess;
  /** Everything the process wrote so far, stdout and stderr interleaved as read. */
  readonly log: string;
  /** Resolves once both streams have ended. */
  readonly drained: Promise<void>;
}

/** Starts `main.ts` with `args`; `env` is added to the environment. */
export function spawnMain(args: string[], env?: Record<string, string>): MainProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN_TS, ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let log = "";
  const decoder = new TextDecoder();
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream) log += decoder.decode(chunk);
  };
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]).then(() => {});
  return {
    child,
    get log() {
      return log;
    },
    drained,
  };
}
