/**
 * "Ours" as it ships: the command line the benchmark runs by default.
 *
 * The release is `deno task compile`'s binary. Where it can be built (`DENORT_BIN` set, see
 * README "Building the binary and the image") the benchmark builds and runs it. Otherwise it runs
 * the bundle (`deno task bundle`'s output: the same module graph) with exactly the permissions
 * and V8 flags of the compile task, read from `deno.json`. The bundle is run once (`--version`)
 * before it is measured: a first `deno run` of a new file analyses its imports and writes that to
 * `DENO_DIR` (about 65 MiB of RSS for the 3.7 MB bundle, measured), which a compiled binary
 * never does at start.
 *
 * @module
 */

/** The flags of a task command that a compiled binary carries: permissions and V8 flags. */
export function runtimeFlags(task: string): string[] {
  return task.split(/\s+/).filter((arg) =>
    arg === "-A" || arg.startsWith("--allow-") || arg.startsWith("--deny-") ||
    arg.startsWith("--v8-flags=")
  );
}

/** The `compile` task of the repository's `deno.json`. */
export async function compileTask(repo: string): Promise<string> {
  const config = JSON.parse(await Deno.readTextFile(`${repo}deno.json`));
  const task = config?.tasks?.compile;
  if (typeof task !== "string") throw new Error(`${repo}deno.json has no compile task`);
  return task;
}

async function deno(args: string[], cwd: string): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`deno ${args.join(" ")} failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Quotes a word for `sh`. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * Builds the shipped form into `dir` and returns its command line (shell text) and a short
 * description.
 *
 * @param denortBin `DENORT_BIN`: when set, the compiled binary is built and run.
 */
export async function buildShippedForm(
  repo: string,
  dir: string,
  denortBin: string | undefined,
): Promise<{ commandLine: string; description: string }> {
  const task = await compileTask(repo);
  if (denortBin) {
    const binary = `${dir}/csi-attacher`;
    const args = task.split(/\s+/).slice(1).filter((a) => a !== "");
    const out = args.indexOf("--output");
    if (out < 0 || args[out + 1] === undefined) throw new Error("compile task has no --output");
    args[out + 1] = binary;
    await deno(args, repo);
    return { commandLine: shellWord(binary), description: "deno compile binary" };
  }
  const bundle = `${dir}/bundle/main.js`;
  await deno(
    [
      "bundle",
      "--frozen",
      "--platform=deno",
      "--code-splitting",
      "--outdir",
      `${dir}/bundle`,
      "main.ts",
    ],
    repo,
  );
  const run = ["run", "--no-prompt", ...runtimeFlags(task), bundle];
  await deno([...run, "--version"], dir);
  return {
    commandLine: [Deno.execPath(), ...run].map(shellWord).join(" "),
    description: "bundle with the compile task's permissions and V8 flags",
  };
}
