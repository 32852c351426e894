/**
 * "Ours" as it ships: the command line the benchmark runs by default.
 *
 * The release is `deno task compile`'s binary, which compiles the release bundle (the compile
 * task's first step: `deno bundle --minify --keep-names`). Where the binary can be built
 * (`DENORT_BIN` set, see README "Building the binary and the image") the benchmark builds and
 * runs it. Otherwise it runs that same release bundle with exactly the permissions and V8 flags of
 * the compile task, read from `deno.json`. The bundle is run once (`--version`) before it is
 * measured: a first `deno run` of a new file analyses its imports and writes that to `DENO_DIR`
 * (about 65 MiB of RSS for the 3.7 MB bundle, measured), which a compiled binary never does at
 * start. Either way it runs with the environment the image sets (the `ENV` lines of the
 * Containerfile's last stage, `DENO_USE_CGROUPS=1` and any other), as `env NAME=VALUE … command`.
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

/**
 * The environment the image sets: the `ENV NAME=VALUE …` lines of a Containerfile's last stage
 * (after its last `FROM`), in order. Values are single words (no quotes, no spaces, no `$`).
 *
 * @throws {SyntaxError} for an `ENV` line of another form (`ENV NAME VALUE`, quotes, variables).
 */
export function imageEnvironment(containerfile: string): [string, string][] {
  const lines = containerfile.split("\n").map((line) => line.trim());
  const from = lines.findLastIndex((line) => /^FROM\s/i.test(line));
  const env: [string, string][] = [];
  for (const line of lines.slice(from + 1)) {
    if (!/^ENV\s/i.test(line)) continue;
    for (const word of line.split(/\s+/).slice(1)) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=([\w@%+:,./-]*)$/.exec(word);
      if (m === null) {
        throw new SyntaxError(`Cannot read the Containerfile's ${JSON.stringify(line)}`);
      }
      env.push([m[1] as string, m[2] as string]);
    }
  }
  return env;
}

/** `env NAME=VALUE …` words for `env`, none when it is empty. */
function envWords(env: [string, string][]): string[] {
  return env.length === 0 ? [] : ["env", ...env.map(([name, value]) => `${name}=${value}`)];
}

/** Quotes a word for `sh`. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The commands of the compile task: the release bundle (`deno bundle … --outdir DIR main.ts`),
 * the version stamp of that bundle (`deno run … stamp_version.ts DIR`) and `deno compile` of its
 * `main.js`, as argument lists without `deno`.
 *
 * @throws {Error} when the task is not `deno bundle … && deno run … && deno compile …`.
 */
export function compileSteps(
  task: string,
): { bundle: string[]; stamp: string[]; compile: string[] } {
  const steps = task.split("&&").map((step) => step.trim().split(/\s+/));
  const [bundle, stamp, compile] = steps;
  if (
    steps.length !== 3 || bundle?.[0] !== "deno" || bundle[1] !== "bundle" ||
    stamp?.[0] !== "deno" || stamp[1] !== "run" ||
    compile?.[0] !== "deno" || compile[1] !== "compile"
  ) {
    throw new Error(
      `the compile task is not "deno bundle … && deno run … && deno compile …": ${task}`,
    );
  }
  return { bundle: bundle.slice(1), stamp: stamp.slice(1), compile: compile.slice(1) };
}

/** `args` with the value after `flag` replaced. */
function withFlagValue(args: string[], flag: string, value: string): string[] {
  const at = args.indexOf(flag);
  if (at < 0 || args[at + 1] === undefined) throw new Error(`${args.join(" ")} has no ${flag}`);
  return args.map((a, i) => (i === at + 1 ? value : a));
}

/**
 * Builds the shipped form into `dir` and returns its command line (shell text) and a short
 * description: the compile task's release bundle, compiled when `denortBin` is set, else run
 * with the compile task's permissions and V8 flags; either under the image's environment
 * (`Containerfile`, {@link imageEnvironment}).
 *
 * @param denortBin `DENORT_BIN`: when set, the compiled binary is built and run.
 */
export async function buildShippedForm(
  repo: string,
  dir: string,
  denortBin: string | undefined,
): Promise<{ commandLine: string; description: string }> {
  const task = await compileTask(repo);
  const steps = compileSteps(task);
  const env = envWords(imageEnvironment(await Deno.readTextFile(`${repo}Containerfile`)));
  const bundle = `${dir}/bundle/main.js`;
  await deno(withFlagValue(steps.bundle, "--outdir", `${dir}/bundle`), repo);
  if (denortBin) {
    const binary = `${dir}/csi-attacher`;
    const args = withFlagValue(steps.compile, "--output", binary);
    args[args.length - 1] = bundle;
    await deno(args, repo);
    return {
      commandLine: [...env, binary].map(shellWord).join(" "),
      description: "deno compile binary with the image's environment",
    };
  }
  const run = ["run", "--no-prompt", ...runtimeFlags(steps.compile.join(" ")), bundle];
  await deno([...run, "--version"], dir);
  return {
    commandLine: [...env, Deno.execPath(), ...run].map(shellWord).join(" "),
    description:
      "release bundle with the compile task's permissions and V8 flags, the image's environment",
  };
}
