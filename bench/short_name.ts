/**
 * The label of an attacher's command line in the tables.
 *
 * @module
 */

/** Words of a command line that only start the real program. */
const WRAPPERS = new Set(["env", "exec", "nice", "setsid", "time", "taskset", "chrt"]);

/**
 * A short name for a command line: the `.ts` or `.js` entry point for a Deno program, else the
 * base name of the first word that is not a wrapper (`env`, `nice`…), an option or a variable
 * assignment.
 */
export function shortName(commandLine: string): string {
  const words = commandLine.trim().split(/\s+/);
  const ts = words.find((w) => w.endsWith(".ts") || w.endsWith(".js"));
  if (ts !== undefined) return ts.split("/").at(-1) as string;
  const program =
    words.find((w) =>
      !w.includes("=") && !w.startsWith("-") && !/^\d+$/.test(w) && !WRAPPERS.has(w)
    ) ?? words[0] ?? "";
  return program.split("/").at(-1) as string;
}
