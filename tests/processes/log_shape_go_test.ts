/**
 * Our log lines have the shape of the Go csi-attacher's for the same events, in both
 * `--logging-format`s: the start-up `"Version"` line and the fatal line when the kubeconfig
 * cannot be read (both processes exit at once, no cluster needed). Compared: klog's text header
 * (severity, date, time with microseconds, pid, `file:line]`), the quoted message, `err=` once;
 * component-base's JSON keys in order, `ts` in epoch milliseconds with a fraction, `caller`, `v`
 * on info lines only, `err` last on error lines.
 *
 * The Go binary is the one `bench/build_go_attacher.ts` builds (found in `GO_ATTACHER`, else the
 * end-to-end suite's and the benchmark's caches). Without it the test is skipped and says so in
 * its name; the end-to-end suite builds it, and
 * `deno run -A bench/build_go_attacher.ts && deno test -A tests/processes/log_shape_go_test.ts`
 * runs the comparison anywhere.
 */

import assert from "node:assert/strict";
import { DEFAULT_VERSION } from "../../bench/build_go_attacher.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

function goBinary(): string | undefined {
  const home = Deno.env.get("HOME") ?? "/tmp";
  const candidates = [
    Deno.env.get("GO_ATTACHER"),
    `${home}/.cache/csi-attacher-e2e/bin/csi-attacher-${DEFAULT_VERSION}`,
    `${home}/.cache/csi-attacher-bench/bin/csi-attacher-${DEFAULT_VERSION}`,
  ];
  for (const path of candidates) {
    if (path === undefined || path === "") continue;
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch {
      // not there
    }
  }
  return undefined;
}

/** The stderr lines of one run with a kubeconfig that does not exist. */
async function linesOf(command: string[], format: "text" | "json"): Promise<string[]> {
  const out = await new Deno.Command(command[0]!, {
    args: [...command.slice(1), `--logging-format=${format}`, "--kubeconfig=/nonexistent/config"],
    stdout: "piped",
    stderr: "piped",
    env: { TZ: "UTC" },
  }).output();
  const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
  return text.split("\n").filter((l) => l !== "");
}

/** A klog text line reduced to its shape: the header's widths and the keys after the message. */
function textShape(line: string): string {
  const m = /^([IWE])(\d{4}) (\d\d:\d\d:\d\d\.\d{6}) +(\d+) ([^\] ]+)\] ("(?:[^"\\]|\\.)*")(.*)$/
    .exec(line);
  assert.ok(m, `not a klog line: ${line}`);
  const keys = [...m[7]!.matchAll(/ ([A-Za-z][\w.-]*)=/g)].map((k) => k[1]);
  // The header's columns: the pid right-aligned in 7 columns, as klog pads it.
  const pidColumn = line.indexOf(` ${m[4]} `) + 1 + m[4]!.length - line.indexOf(m[3]!) -
    m[3]!.length;
  return `${m[1]}MMDD hh:mm:ss.uuuuuu pid(${pidColumn}) caller] "msg" ${keys.join(" ")}`;
}

/** A JSON line reduced to its keys in order with the type of each. */
function jsonShape(line: string): string {
  const value = JSON.parse(line) as Record<string, unknown>;
  return Object.entries(value).map(([k, v]) => `${k}:${typeof v}`).join(",");
}

/** Drops the fields one side has and the other lacks by design (`version` vs none). */
function firstOf(lines: string[], severity: "I" | "E", format: "text" | "json"): string {
  const line = lines.find((l) =>
    format === "text" ? l.startsWith(severity) : (severity === "I") === ("v" in JSON.parse(l))
  );
  assert.ok(line !== undefined, `no ${severity} line in\n${lines.join("\n")}`);
  return line;
}

const go = goBinary();
const ours = [Deno.execPath(), "run", "--allow-all", MAIN];

Deno.test({
  name: go === undefined
    ? `log lines have the Go csi-attacher's shape (skipped: no Go binary; build it with ` +
      "`deno run -A bench/build_go_attacher.ts` or set GO_ATTACHER)"
    : "log lines have the Go csi-attacher's shape, text and JSON, for the same events",
  ignore: go === undefined,
  async fn() {
    for (const format of ["text", "json"] as const) {
      const [goLines, ourLines] = await Promise.all([
        linesOf([go!], format),
        linesOf(ours, format),
      ]);
      for (const severity of ["I", "E"] as const) {
        const g = firstOf(goLines, severity, format);
        const o = firstOf(ourLines, severity, format);
        const shape = format === "text" ? textShape : jsonShape;
        assert.equal(shape(o), shape(g), `${format} ${severity}:\n go:   ${g}\n ours: ${o}`);
      }
      if (format === "json") {
        for (const line of [...goLines, ...ourLines]) {
          const ts = JSON.parse(line).ts as number;
          assert.ok(Math.abs(ts - Date.now()) < 60_000, `ts ${ts} is not epoch ms: ${line}`);
        }
      } else {
        // One text per fatal line: the error's text appears once.
        const fatal = firstOf(ourLines, "E", format);
        const err = /err="((?:[^"\\]|\\.)*)"/.exec(fatal)![1]!;
        assert.equal(fatal.split(err).length - 1, 1, fatal);
      }
    }
  },
});
