/**
 * The results of `csi-attacher sandbox check` for people and for CI: the JSON document of
 * `--output=json` and the JUnit XML file of `--junit=FILE` (one test case per check: a
 * `<failure>` for a failed check, `<skipped>` with the reason for a skipped one, the check's
 * timeline as `<system-out>`).
 *
 * @module
 */

import type { CheckStatus } from "./checks.ts";

/** One check's result as reported. */
export interface CheckRecord {
  id: string;
  title: string;
  status: CheckStatus;
  message: string;
  /** The attacher's own text (attachError/detachError message or log line), if any. */
  attacherText?: string;
  /** Wall time of the check, in ms. */
  durationMs: number;
  /** The check's timeline lines (API requests, CSI calls, its own steps). */
  timeline: string[];
}

/** A whole run. */
export interface CheckReport {
  /** `--csi-address`, or `built-in example driver`. */
  driverAddress: string;
  /** From GetPluginInfo; "" when the startup failed before. */
  driverName: string;
  checks: CheckRecord[];
}

/** Counts per status. */
export function summarize(report: CheckReport): Record<CheckStatus, number> {
  const counts: Record<CheckStatus, number> = { passed: 0, failed: 0, skipped: 0 };
  for (const check of report.checks) counts[check.status] += 1;
  return counts;
}

/** 0 when every check that applies passed, else 1. */
export function exitCodeOf(report: CheckReport): number {
  return summarize(report).failed === 0 ? 0 : 1;
}

/** The `--output=json` document. */
export function reportJson(report: CheckReport): string {
  return JSON.stringify(
    {
      driver: { address: report.driverAddress, name: report.driverName },
      summary: summarize(report),
      exitCode: exitCodeOf(report),
      checks: report.checks.map((c) => ({
        id: c.id,
        title: c.title,
        status: c.status,
        message: c.message,
        ...(c.attacherText === undefined ? {} : { attacherText: c.attacherText }),
        durationMs: Math.round(c.durationMs),
        timeline: c.timeline,
      })),
    },
    null,
    2,
  );
}

/** Text escaped for XML character data and attribute values; control characters dropped. */
export function xmlEscape(text: string): string {
  return text
    // XML 1.0 allows tab, newline and carriage return only of the C0 controls.
    // deno-lint-ignore no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "")
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;");
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

/** The `--junit=FILE` document (the JUnit XML most CI systems read). */
export function reportJunit(report: CheckReport): string {
  const counts = summarize(report);
  const total = report.checks.reduce((sum, c) => sum + c.durationMs, 0);
  const suite = `csi-attacher sandbox check${
    report.driverName === "" ? "" : ` ${report.driverName}`
  }`;
  const lines = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${
      xmlEscape(suite)
    }" tests="${report.checks.length}" failures="${counts.failed}" skipped="${counts.skipped}" time="${
      seconds(total)
    }">`,
    `  <testsuite name="${
      xmlEscape(suite)
    }" tests="${report.checks.length}" failures="${counts.failed}" errors="0" skipped="${counts.skipped}" time="${
      seconds(total)
    }">`,
  ];
  for (const check of report.checks) {
    const open = `    <testcase classname="csi-attacher.sandbox.check" name="${
      xmlEscape(check.id)
    }" time="${seconds(check.durationMs)}">`;
    lines.push(open);
    if (check.status === "failed") {
      lines.push(
        `      <failure message="${xmlEscape(check.message)}" type="${
          xmlEscape(check.attacherText === undefined ? "check" : "attacher")
        }">${xmlEscape(check.attacherText ?? check.message)}</failure>`,
      );
    } else if (check.status === "skipped") {
      lines.push(`      <skipped message="${xmlEscape(check.message)}"/>`);
    }
    const out = [check.title, ...check.timeline, `${check.status}: ${check.message}`];
    lines.push(`      <system-out>${xmlEscape(out.join("\n"))}</system-out>`);
    lines.push("    </testcase>");
  }
  lines.push("  </testsuite>", "</testsuites>", "");
  return lines.join("\n");
}
