/**
 * Running short commands (go, openssl) and collecting their output.
 *
 * @module
 */

/** The outcome of {@link run}. */
export interface RunResult {
  /** True when the command started and exited with status 0. */
  ok: boolean;
  /** Exit status; -1 when the command could not start. */
  code: number;
  stdout: string;
  stderr: string;
  /** Why the command could not start; "" when it started. */
  error: string;
}

/** Options of {@link run}. */
export interface RunOptions {
  cwd?: string;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Text fed to standard input. */
  stdin?: string;
}

/** Runs a command to completion. Never rejects for a failing or missing command. */
export async function run(
  cmd: string,
  args: string[],
  options: RunOptions = {},
): Promise<RunResult> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(cmd, {
      args,
      cwd: options.cwd,
      env: options.env,
      stdin: options.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    return { ok: false, code: -1, stdout: "", stderr: "", error };
  }
  if (options.stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(options.stdin));
    await writer.close();
  }
  const out = await child.output();
  const decoder = new TextDecoder();
  return {
    ok: out.success,
    code: out.code,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
    error: "",
  };
}

/**
 * Runs a command and returns its standard output.
 *
 * @throws {Error} when it cannot start or exits with a non-zero status (with its stderr).
 */
export async function runOk(
  cmd: string,
  args: string[],
  options: RunOptions = {},
): Promise<string> {
  const result = await run(cmd, args, options);
  if (!result.ok) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed (status ${result.code}): ${result.stderr}${result.error}`,
    );
  }
  return result.stdout;
}

/** Lower-case hex of bytes. */
export function encodeHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
