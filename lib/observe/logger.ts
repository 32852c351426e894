/**
 * The logging seam: klog-style structured logging with constant messages and key/value fields.
 * The implementation is {@link import("./log.ts").createLogger}.
 *
 * @module
 */

/** Key/value pairs of one log line. Values are rendered as JSON (text format: `key="value"`). */
export type Fields = Record<string, unknown>;

/** A structured logger. `v(n)` lines appear only when `--v` is at least `n`. */
export interface Logger {
  /** An info line at verbosity 0. */
  info(msg: string, fields?: Fields): void;
  /** An error line; `err` is rendered as its message in the `err` field. */
  error(err: unknown, msg: string, fields?: Fields): void;
  /** A logger whose info lines have verbosity `level`. */
  v(level: number): Pick<Logger, "info">;
  /** True when lines of verbosity `level` are written. */
  enabled(level: number): boolean;
  /** A child logger that adds `fields` to every line. */
  with(fields: Fields): Logger;
}

/** A logger that drops everything. */
export const nullLogger: Logger = {
  info() {},
  error() {},
  v: () => nullLogger,
  enabled: () => false,
  with: () => nullLogger,
};
