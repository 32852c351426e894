/**
 * A benchmark helper process (the fake API server or the fake driver): a Deno script that prints
 * one JSON line when it is ready and then serves until it is killed. Its standard error is kept
 * (the last 16 KiB) for error messages.
 *
 * @module
 */

const STDERR_KEEP = 16 * 1024;

/** A running helper. */
export class HelperProcess {
  readonly #child: Deno.ChildProcess;
  readonly #name: string;
  #stderr = "";
  readonly #drained: Promise<void>;

  /** Wraps a spawned child; use {@link HelperProcess.start}. */
  constructor(deps: { child: Deno.ChildProcess }, options: { name: string }) {
    this.#child = deps.child;
    this.#name = options.name;
    this.#drained = this.#drain();
  }

  /**
   * Runs `deno run -A <script> ...args` and resolves with the process and its first stdout line
   * parsed as JSON.
   *
   * @throws {Error} when the process ends or prints something else before its ready line.
   */
  static async start(
    name: string,
    script: string,
    args: string[],
  ): Promise<{ process: HelperProcess; ready: Record<string, string> }> {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", script, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const process = new HelperProcess({ child }, { name });
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    try {
      while (!buffered.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += value;
      }
    } finally {
      reader.releaseLock();
    }
    const line = buffered.split("\n")[0] ?? "";
    try {
      return { process, ready: JSON.parse(line) as Record<string, string> };
    } catch (err) {
      await process.stop();
      throw new Error(`${name} did not start: ${line || "(no output)"}\n${process.stderr}`, {
        cause: err,
      });
    }
  }

  /** Process id. */
  get pid(): number {
    return this.#child.pid;
  }

  /** The last part of its standard error. */
  get stderr(): string {
    return this.#stderr;
  }

  /** Kills it and waits for it to exit. */
  async stop(): Promise<void> {
    try {
      this.#child.kill("SIGKILL");
    } catch (err) {
      if (!(err instanceof TypeError)) throw err; // TypeError: it has already exited
    }
    await this.#child.status;
    await this.#child.stdout.cancel().catch((err: unknown) => {
      if (!(err instanceof TypeError)) throw err; // already locked or closed
    });
    await this.#drained;
  }

  async #drain(): Promise<void> {
    for await (const chunk of this.#child.stderr.pipeThrough(new TextDecoderStream())) {
      this.#stderr = (this.#stderr + chunk).slice(-STDERR_KEEP);
    }
  }

  /** Name for messages. */
  get name(): string {
    return this.#name;
  }
}
