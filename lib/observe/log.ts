/**
 * The klog-compatible logger behind the {@link Logger} seam, in the two formats the Go sidecars
 * offer through `--logging-format`:
 *
 * - text (klog): `I1121 22:30:01.123456    1234 attacher] "Attached" volumeAttachment="va1"`
 *   — severity `I`/`E`, month and day, local wall time with microseconds, the pid padded to 7
 *   columns, a component name where klog prints `file:line`, then the quoted message, `err="..."`
 *   on error lines and the fields as `key=value` (strings quoted, everything else compact JSON).
 * - json (component-base / logr, `k8s.io/component-base/logs/json/json.go`): one object per
 *   line, `{"ts":1700000000123.456,"caller":"attacher","msg":"Attached","v":2,"node":"n1"}`:
 *   `ts` in epoch milliseconds with a fraction (component-base's `epochMillisTimeEncoder`),
 *   `caller` (the component, where zap writes `file:line`), then the `with()` fields, `v`, and
 *   the call's fields, in zapr's order; error lines carry no `v` and end with `"err"`.
 *
 * Like klog and component-base, every line goes to stderr by default (neither splits info and
 * errors unless the alpha split-stream options are on, which this attacher accepts and ignores).
 * Values are never truncated. Secrets must never be passed in: the logger does not redact.
 *
 * @module
 */

import { type Clock, preciseWallNow, realClock } from "../clock.ts";
import { errorText } from "../errors.ts";
import type { Fields, Logger } from "./logger.ts";

/** How {@link createLogger} formats and where it writes. */
export interface LoggerOptions {
  /** `--v`: info lines of a higher verbosity are dropped. */
  verbosity: number;
  /** `--logging-format`. */
  format: "text" | "json";
  /**
   * Receives each finished line, without the trailing newline. Defaults to a synchronous write
   * of the line and `\n` to stderr.
   */
  write?: (line: string) => void;
  /** The time source; only its wall time is read, for the line timestamps. @default realClock */
  clock?: Clock;
  /** The pid in text lines (default: this process's pid). */
  pid?: number;
  /** Printed where klog prints `file:line` in text lines (default `attacher`). */
  component?: string;
  /** Text timestamps in UTC instead of local time (klog uses local time, the default). */
  utc?: boolean;
}

/** The depth up to which nested values and error causes are followed. */
const MAX_DEPTH = 32;

/**
 * Converts `value` into plain JSON data that `JSON.stringify` cannot fail on: errors become
 * their text, bigints strings, Maps objects, Sets arrays, cycles `"[Circular]"`, functions
 * `"[Function name]"` and symbols their `String()`.
 */
function toPlain(value: unknown, ancestors: object[]): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "bigint":
      return value.toString();
    case "undefined":
      return null;
    case "function":
      return `[Function ${value.name || "anonymous"}]`;
    case "symbol":
      return String(value);
  }
  if (value === null) return null;
  const obj = value as object;
  if (obj instanceof Error) return errorText(obj);
  if (ancestors.includes(obj)) return "[Circular]";
  if (ancestors.length >= MAX_DEPTH) return "[Too deep]";
  const nested = [...ancestors, obj];
  if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? "Invalid Date" : obj.toISOString();
  if (obj instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of obj) out[String(k)] = toPlain(v, nested);
    return out;
  }
  if (obj instanceof Set) return [...obj].map((v) => toPlain(v, nested));
  if (Array.isArray(obj)) return obj.map((v) => toPlain(v, nested));
  if (ArrayBuffer.isView(obj)) return `[${obj.constructor.name} ${obj.byteLength} bytes]`;
  const toJSON = (obj as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    let json: unknown;
    try {
      json = toJSON.call(obj);
    } catch (err) {
      return `[toJSON failed: ${errorText(err)}]`;
    }
    return json === obj ? "[Circular]" : toPlain(json, nested);
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
    out[k] = toPlain(v, nested);
  }
  return out;
}

/** Compact JSON of any value; never throws. */
function toJson(value: unknown): string {
  return JSON.stringify(toPlain(value, []));
}

/** A field value in the text format: strings and errors quoted, everything else compact JSON. */
function textValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value instanceof Error) return JSON.stringify(errorText(value));
  return toJson(value);
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/** klog's header time: `MMDD hh:mm:ss.uuuuuu`. */
function klogTime(ms: number, utc: boolean): string {
  const totalMicros = Math.round(ms * 1000);
  const micros = ((totalMicros % 1_000_000) + 1_000_000) % 1_000_000;
  const d = new Date(Math.floor(totalMicros / 1000));
  const month = utc ? d.getUTCMonth() : d.getMonth();
  const day = utc ? d.getUTCDate() : d.getDate();
  const h = utc ? d.getUTCHours() : d.getHours();
  const m = utc ? d.getUTCMinutes() : d.getMinutes();
  const s = utc ? d.getUTCSeconds() : d.getSeconds();
  return `${pad(month + 1, 2)}${pad(day, 2)} ${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}.${
    pad(micros, 6)
  }`;
}

/** One line to write. */
interface Entry {
  severity: "I" | "E";
  level: number;
  msg: string;
  /** Present on error lines that carry an error value. */
  err?: unknown;
  /** The fields of `with()`. */
  with: Fields;
  /** The fields of `with()` without those the call overrides (JSON lines). */
  context: Fields;
  /** The call's fields. */
  fields: Fields;
}

/** What every logger derived from one {@link createLogger} call shares. */
interface Sink {
  verbosity: number;
  format: "text" | "json";
  write: (line: string) => void;
  clock: Clock;
  pid: number;
  component: string;
  utc: boolean;
}

/**
 * The wall time of a line in milliseconds: with microseconds from the real clock (klog writes
 * them, component-base's JSON a fraction of a millisecond), the injected clock's otherwise.
 */
function lineTime(sink: Sink): number {
  return sink.clock === realClock ? preciseWallNow() : sink.clock.wallNow();
}

function formatText(sink: Sink, entry: Entry): string {
  const pid = String(sink.pid).padStart(7, " ");
  let line = `${entry.severity}${klogTime(lineTime(sink), sink.utc)} ${pid} ${sink.component}] ${
    JSON.stringify(entry.msg)
  }`;
  if (entry.err !== undefined && entry.err !== null) {
    line += ` err=${JSON.stringify(errorText(entry.err))}`;
  }
  // klog's order: a call field that overrides a with() field takes the with() field's place.
  const all = Object.keys(entry.fields).length === 0
    ? entry.with
    : Object.keys(entry.with).length === 0
    ? entry.fields
    : { ...entry.with, ...entry.fields };
  for (const [key, value] of Object.entries(all)) line += ` ${key}=${textValue(value)}`;
  return line;
}

function formatJson(sink: Sink, entry: Entry): string {
  let line = `{"ts":${lineTime(sink)},"caller":${JSON.stringify(sink.component)},"msg":${
    JSON.stringify(entry.msg)
  }`;
  for (const [key, value] of Object.entries(entry.context)) {
    line += `,${JSON.stringify(key)}:${toJson(value)}`;
  }
  if (entry.severity === "I") line += `,"v":${entry.level}`;
  for (const [key, value] of Object.entries(entry.fields)) {
    line += `,${JSON.stringify(key)}:${toJson(value)}`;
  }
  if (entry.err !== undefined && entry.err !== null) {
    line += `,"err":${JSON.stringify(errorText(entry.err))}`;
  }
  return `${line}}`;
}

/** What `v(n)` gives when level `n` is off: one shared object, so a call allocates nothing. */
const SILENT: Pick<Logger, "info"> = Object.freeze({ info() {} });

/** A {@link Logger} writing klog text or JSON lines to one sink. */
class KlogLogger implements Logger {
  readonly #sink: Sink;
  readonly #fields: Fields;

  constructor(sink: Sink, fields: Fields) {
    this.#sink = sink;
    this.#fields = fields;
  }

  #emit(entry: Omit<Entry, "fields" | "context" | "with">, fields: Fields | undefined): void {
    let context = this.#fields;
    if (fields !== undefined) {
      for (const key of Object.keys(fields)) {
        if (!Object.hasOwn(context, key)) continue;
        // A call field overrides a with() field of the same key, in the call's place.
        context = { ...context };
        for (const k of Object.keys(fields)) delete context[k];
        break;
      }
    }
    const full = { ...entry, with: this.#fields, context, fields: fields ?? {} };
    const line = this.#sink.format === "json"
      ? formatJson(this.#sink, full)
      : formatText(this.#sink, full);
    this.#sink.write(line);
  }

  info(msg: string, fields?: Fields): void {
    this.#emit({ severity: "I", level: 0, msg }, fields);
  }

  error(err: unknown, msg: string, fields?: Fields): void {
    this.#emit({ severity: "E", level: 0, msg, err }, fields);
  }

  v(level: number): Pick<Logger, "info"> {
    if (!this.enabled(level)) return SILENT;
    return {
      info: (msg: string, fields?: Fields) => this.#emit({ severity: "I", level, msg }, fields),
    };
  }

  enabled(level: number): boolean {
    return this.#sink.verbosity >= level;
  }

  with(fields: Fields): Logger {
    return new KlogLogger(this.#sink, { ...this.#fields, ...fields });
  }
}

/**
 * Writes `line` and a newline to stderr synchronously, so nothing is lost when the process
 * exits right after logging. Once stderr fails (closed pipe) the sink stops writing: there is
 * nowhere left to report the failure.
 */
function stderrWriter(): (line: string) => void {
  const encoder = new TextEncoder();
  let broken = false;
  return (line) => {
    if (broken) return;
    const bytes = encoder.encode(`${line}\n`);
    try {
      let offset = 0;
      while (offset < bytes.length) offset += Deno.stderr.writeSync(bytes.subarray(offset));
    } catch {
      broken = true;
    }
  };
}

/**
 * Creates the process logger.
 *
 * Guarantees: one call writes exactly one line; info lines from `v(n)` appear only when
 * `verbosity >= n`; error lines always appear; fields of `with()` come before call fields, and a
 * call field overrides a `with()` field of the same key; values are rendered whole (no
 * truncation), objects as compact JSON, errors as {@link errorText}; logging never throws on
 * odd values (cycles, bigints, throwing `toJSON`).
 *
 * @example
 * ```ts
 * const lines: string[] = [];
 * const log = createLogger({ verbosity: 2, format: "json", write: (l) => lines.push(l) });
 * log.with({ volumeAttachment: "va1" }).v(2).info("Attached", { node: "n1" });
 * // {"ts":...,"caller":"attacher","msg":"Attached","volumeAttachment":"va1","v":2,"node":"n1"}
 * ```
 * @throws {RangeError} when `verbosity` is not a number or `format` is unknown
 */
export function createLogger(options: LoggerOptions): Logger {
  if (typeof options.verbosity !== "number" || Number.isNaN(options.verbosity)) {
    throw new RangeError(`Cannot create logger: verbosity ${options.verbosity} is not a number`);
  }
  if (options.format !== "text" && options.format !== "json") {
    throw new RangeError(`Cannot create logger: unknown format ${JSON.stringify(options.format)}`);
  }
  const sink: Sink = {
    verbosity: options.verbosity,
    format: options.format,
    write: options.write ?? stderrWriter(),
    clock: options.clock ?? realClock,
    pid: options.pid ?? Deno.pid,
    component: options.component ?? "attacher",
    utc: options.utc ?? false,
  };
  return new KlogLogger(sink, {});
}
