/**
 * A {@link Logger} for tests that keeps every line it would write.
 *
 * @module
 */

import type { Fields, Logger } from "../../lib/observe/logger.ts";

/** One captured line. */
export interface CapturedLine {
  /** Verbosity of an info line; undefined for error lines. */
  v: number | undefined;
  msg: string;
  fields: Fields;
  /** The error of an error line. */
  err?: unknown;
}

/**
 * Captures lines up to `verbosity` (as `--v`), with fields added by `with()` merged in.
 *
 * @example
 * ```ts ignore
 * const log = new FakeLogger(5);
 * log.v(5).info("GRPC call", { method: "/csi.v1.Identity/Probe" });
 * log.lines[0].msg; // "GRPC call"
 * ```
 */
export class FakeLogger implements Logger {
  readonly lines: CapturedLine[];
  #verbosity: number;
  #fields: Fields;

  constructor(verbosity = 10, shared: { lines?: CapturedLine[]; fields?: Fields } = {}) {
    this.#verbosity = verbosity;
    this.lines = shared.lines ?? [];
    this.#fields = shared.fields ?? {};
  }

  info(msg: string, fields: Fields = {}): void {
    this.#infoAt(0, msg, fields);
  }

  error(err: unknown, msg: string, fields: Fields = {}): void {
    this.lines.push({ v: undefined, msg, fields: { ...this.#fields, ...fields }, err });
  }

  v(level: number): Pick<Logger, "info"> {
    return { info: (msg, fields = {}) => this.#infoAt(level, msg, fields) };
  }

  enabled(level: number): boolean {
    return level <= this.#verbosity;
  }

  with(fields: Fields): Logger {
    return new FakeLogger(this.#verbosity, {
      lines: this.lines,
      fields: { ...this.#fields, ...fields },
    });
  }

  /** Every captured line as one JSON text per line, for "never appears" checks. */
  text(): string {
    return this.lines.map((l) => JSON.stringify({ ...l, err: String(l.err ?? "") })).join("\n");
  }

  /** Lines with message `msg`. */
  withMessage(msg: string): CapturedLine[] {
    return this.lines.filter((l) => l.msg === msg);
  }

  #infoAt(level: number, msg: string, fields: Fields): void {
    if (!this.enabled(level)) return;
    this.lines.push({ v: level, msg, fields: { ...this.#fields, ...fields } });
  }
}
