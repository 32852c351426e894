/**
 * A command-line parser with the semantics of Go's `flag` package, which every Kubernetes CSI
 * sidecar uses: `-name` and `--name` are the same flag, values come as `-name=value` or
 * `-name value`, bool flags take only the bare form or `-name=value`, `--` ends the flags, and
 * parsing stops at the first argument that is not a flag. `node:util` `parseArgs` cannot do this
 * (it reads `-v=5` as the value `"=5"` and `-leader-election` as a group of short options).
 *
 * The parser never prints or exits: errors are thrown as {@link FlagError} with Go's message, a
 * request for help is a distinct result, and {@link FlagSet.usage} gives Go's `PrintDefaults`
 * text for the caller to print.
 *
 * @example
 * ```ts
 * const fs = new FlagSet({ name: "csi-attacher" });
 * const timeout = fs.duration("timeout", 15_000, "Timeout for one call.");
 * const leader = fs.bool("leader-election", false, "Enable leader election.");
 * const result = fs.parse(["--timeout=1m30s", "-leader-election", "extra"]);
 * // timeout.value === 90000, leader.value === true, result.args === ["extra"]
 * ```
 *
 * @module
 */

import { formatGoDuration, parseGoDuration } from "../go_duration.ts";
import { errorText } from "../errors.ts";

/** The value kinds a {@link FlagSet} knows, after Go's `flag` package. */
export type FlagKind = "string" | "bool" | "int" | "uint" | "float" | "duration" | "custom";

/** Notes shown in the usage text under a flag's description. */
export interface FlagNotes {
  /** Marks the flag as deprecated; the text says what to use instead. */
  deprecated?: string;
  /** Marks the flag as accepted but without effect; the text says why. */
  ignored?: string;
  /**
   * The value may hold a credential: {@link Flag.valueText} reads `CLASSIFIED` (component-base
   * `zpages/flagz/flagreader.go` masks flags annotated `classified` so).
   */
  classified?: boolean;
}

/** How a custom flag turns its text into a value. */
export interface CustomFlagSpec<T> extends FlagNotes {
  /**
   * Returns the new value for `text`, given the current value (so a map-like flag can merge
   * repeated occurrences). Throws an `Error` whose message becomes the reason in
   * `invalid value "<text>" for flag -<name>: <message>`.
   */
  parse(text: string, current: T): T;
  /** Like a Go bool flag: the bare `-name` form means `-name=true`. */
  isBool?: boolean;
  /** The type name in the usage line (Go prints `value` for custom flags). */
  typeName?: string;
  /** Printed as `(default <text>)` in the usage text; omitted when absent. */
  defaultText?: string;
  /**
   * The value as text, Go's `flag.Value.String()`; default: the value itself for strings,
   * numbers and booleans, `key=value` pairs sorted and joined by `,` for a record.
   */
  format?(value: T): string;
}

/** A defined flag; `value` changes when {@link FlagSet.parse} sets it. */
export interface Flag<T> {
  readonly name: string;
  readonly kind: FlagKind;
  readonly usage: string;
  readonly defaultValue: T;
  readonly deprecated: string | undefined;
  readonly ignored: string | undefined;
  /** The value may hold a credential (see {@link FlagNotes.classified}). */
  readonly classified: boolean;
  /** The default until the command line sets it; the last occurrence wins. */
  readonly value: T;
  /** True once the command line has set the flag. */
  readonly isSet: boolean;
  /**
   * The current value as Go's `flag.Value.String()` writes it (`15s`, `true`, `/run/csi/socket`),
   * or `CLASSIFIED` for a classified flag.
   */
  valueText(): string;
}

/** The outcome of a parse that did not fail. */
export type FlagParseResult =
  | { readonly helpRequested: false; readonly args: string[] }
  | { readonly helpRequested: true };

/**
 * A command-line error, with Go's message (`flag provided but not defined: -bogus`,
 * `flag needs an argument: -csi-address`, ...). The caller prints the message and the usage
 * text and exits with status 2, as Go's `flag.ExitOnError` does.
 */
export class FlagError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "FlagError";
  }
}

/** Quotes `s` like Go's `%q` for the printable ASCII texts command lines contain. */
export function goQuote(s: string): string {
  return JSON.stringify(s);
}

/**
 * Parses a boolean like Go's `strconv.ParseBool`: `1 t T TRUE true True` and
 * `0 f F FALSE false False`.
 *
 * @throws {Error} `strconv.ParseBool: parsing "<text>": invalid syntax` for anything else
 */
export function parseGoBool(text: string): boolean {
  switch (text) {
    case "1":
    case "t":
    case "T":
    case "TRUE":
    case "true":
    case "True":
      return true;
    case "0":
    case "f":
    case "F":
    case "FALSE":
    case "false":
    case "False":
      return false;
  }
  throw new Error(`strconv.ParseBool: parsing ${goQuote(text)}: invalid syntax`);
}

/**
 * Go's `flag` package reasons for numeric values. Go replaces the `strconv`/`time` error with
 * these (`flag.go` `numError`, `errParse`, `errRange`), dropping its detail; so do we: the
 * errors thrown with them carry no cause, so that their text is exactly Go's.
 */
const PARSE_ERROR = "parse error";
const RANGE_ERROR = "value out of range";

/** Go's `underscoreOK`: underscores only between digits, or between a base prefix and a digit. */
function underscoreOk(text: string): boolean {
  let s = text;
  if (s[0] === "-" || s[0] === "+") s = s.slice(1);
  let saw = "^";
  let i = 0;
  let hex = false;
  const p = s[1]?.toLowerCase();
  if (s.length >= 2 && s[0] === "0" && (p === "b" || p === "o" || p === "x")) {
    i = 2;
    saw = "0";
    hex = p === "x";
  }
  for (; i < s.length; i++) {
    const c = s[i]!;
    const lc = c.toLowerCase();
    if ((c >= "0" && c <= "9") || (hex && lc >= "a" && lc <= "f")) {
      saw = "0";
      continue;
    }
    if (c === "_") {
      if (saw !== "0") return false;
      saw = "_";
      continue;
    }
    if (saw === "_") return false;
    saw = "!";
  }
  return saw !== "_";
}

/**
 * Parses an integer like Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint(s, 0, 64)`: base
 * prefixes `0x`, `0o`, `0b`, a leading `0` for octal, and underscores as digit separators.
 * Throws an `Error` with the `flag` package's reason (`parse error` or `value out of range`).
 */
function parseGoInteger(text: string, signed: boolean): bigint {
  let s = text;
  let negative = false;
  if (signed && (s[0] === "-" || s[0] === "+")) {
    negative = s[0] === "-";
    s = s.slice(1);
  }
  if (s === "") throw new Error(PARSE_ERROR);
  let base = 10n;
  if (s[0] === "0") {
    const p = s[1]?.toLowerCase();
    if (s.length >= 3 && p === "b") {
      base = 2n;
      s = s.slice(2);
    } else if (s.length >= 3 && p === "o") {
      base = 8n;
      s = s.slice(2);
    } else if (s.length >= 3 && p === "x") {
      base = 16n;
      s = s.slice(2);
    } else {
      base = 8n;
      s = s.slice(1);
    }
  }
  const maxUint = (1n << 64n) - 1n;
  let n = 0n;
  let underscores = false;
  for (const c of s) {
    if (c === "_") {
      underscores = true;
      continue;
    }
    const digit = parseInt(c, 36);
    if (Number.isNaN(digit) || BigInt(digit) >= base) throw new Error(PARSE_ERROR);
    n = n * base + BigInt(digit);
    if (n > maxUint) throw new Error(RANGE_ERROR);
  }
  if (underscores && !underscoreOk(text)) throw new Error(PARSE_ERROR);
  if (signed && n > (negative ? 1n << 63n : (1n << 63n) - 1n)) throw new Error(RANGE_ERROR);
  return negative ? -n : n;
}

const DECIMAL_FLOAT = /^[+-]?(?:[0-9_]+\.?[0-9_]*|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9_]+)?$/;
const HEX_FLOAT = /^([+-]?)0[xX]([0-9a-fA-F_]*)(?:\.([0-9a-fA-F_]*))?[pP]([+-]?[0-9_]+)$/;
const SPECIAL_FLOAT = /^([+-]?)(inf|infinity|nan)$/i;

/**
 * Parses a float like Go's `strconv.ParseFloat(s, 64)`: decimal and hexadecimal (`0x1p-2`)
 * forms, `inf`/`infinity`/`nan` in any case. Throws an `Error` with the `flag` package's reason.
 */
function parseGoFloat(text: string): number {
  const special = SPECIAL_FLOAT.exec(text);
  if (special) {
    const word = special[2]!.toLowerCase();
    if (word === "nan") {
      if (special[1] !== "") throw new Error(PARSE_ERROR);
      return NaN;
    }
    return special[1] === "-" ? -Infinity : Infinity;
  }
  if (text.includes("_") && !underscoreOk(text.replace(/[eEpP][+-]?.*$/, ""))) {
    throw new Error(PARSE_ERROR);
  }
  let value: number;
  const hex = HEX_FLOAT.exec(text);
  if (hex) {
    const intDigits = hex[2]!.replaceAll("_", "");
    const fracDigits = (hex[3] ?? "").replaceAll("_", "");
    if (intDigits === "" && fracDigits === "") throw new Error(PARSE_ERROR);
    const mantissa = parseInt(intDigits + fracDigits || "0", 16);
    const exponent = parseInt(hex[4]!.replaceAll("_", ""), 10) - 4 * fracDigits.length;
    value = mantissa * 2 ** exponent;
    if (hex[1] === "-") value = -value;
  } else {
    if (!DECIMAL_FLOAT.exec(text) || !/[0-9]/.test(text.replace(/[eE].*$/, ""))) {
      throw new Error(PARSE_ERROR);
    }
    value = Number(text.replaceAll("_", ""));
    if (Number.isNaN(value)) throw new Error(PARSE_ERROR);
  }
  if (!Number.isFinite(value)) throw new Error(RANGE_ERROR);
  return value;
}

/** What a classified flag's {@link Flag.valueText} reads. */
export const CLASSIFIED = "CLASSIFIED";

/** The default text of a custom flag's value (see {@link CustomFlagSpec.format}). */
function formatValue(value: unknown): string {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    return Object.entries(value).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
      .map(([k, v]) => `${k}=${String(v)}`).join(",");
  }
  return String(value);
}

/** A flag's behaviour: how it reads text and how the usage text shows it. */
interface FlagCodec<T> {
  parse(text: string, current: T): T;
  isBool: boolean;
  typeName: string;
  /** The `(default ...)` text, or undefined when the default is the zero value. */
  defaultText(value: T): string | undefined;
  /** The value as Go's `flag.Value.String()` writes it. */
  valueText(value: T): string;
}

/** One defined flag with its current value. */
class DefinedFlag<T> implements Flag<T> {
  readonly name: string;
  readonly kind: FlagKind;
  readonly usage: string;
  readonly defaultValue: T;
  readonly deprecated: string | undefined;
  readonly ignored: string | undefined;
  readonly classified: boolean;
  readonly codec: FlagCodec<T>;
  #value: T;
  #isSet = false;

  constructor(
    spec: { name: string; kind: FlagKind; usage: string; defaultValue: T; notes: FlagNotes },
    codec: FlagCodec<T>,
  ) {
    this.name = spec.name;
    this.kind = spec.kind;
    this.usage = spec.usage;
    this.defaultValue = spec.defaultValue;
    this.deprecated = spec.notes.deprecated;
    this.ignored = spec.notes.ignored;
    this.classified = spec.notes.classified === true;
    this.codec = codec;
    this.#value = spec.defaultValue;
  }

  get value(): T {
    return this.#value;
  }

  get isSet(): boolean {
    return this.#isSet;
  }

  valueText(): string {
    return this.classified ? CLASSIFIED : this.codec.valueText(this.#value);
  }

  /** Sets the value from command-line text; throws the codec's error unchanged. */
  setText(text: string): void {
    this.#value = this.codec.parse(text, this.#value);
    this.#isSet = true;
  }
}

/**
 * Go's `UnquoteUsage`: the first back-quoted word of the usage names the value in the usage
 * line (and loses its quotes), otherwise the type name is used.
 */
function unquoteUsage(flag: DefinedFlag<unknown>): { typeName: string; usage: string } {
  const usage = flag.usage;
  const start = usage.indexOf("`");
  if (start >= 0) {
    const end = usage.indexOf("`", start + 1);
    if (end >= 0) {
      const typeName = usage.slice(start + 1, end);
      return { typeName, usage: usage.slice(0, start) + typeName + usage.slice(end + 1) };
    }
  }
  return { typeName: flag.codec.typeName, usage };
}

/**
 * A set of flags parsed with Go `flag` semantics (see the module documentation).
 *
 * Define every flag first, then call {@link FlagSet.parse} once. Definitions return a
 * {@link Flag} whose `value` holds the default until the command line sets it.
 */
export class FlagSet {
  readonly #name: string;
  readonly #flags = new Map<string, DefinedFlag<unknown>>();

  /** @param options.name the program name shown in `Usage of <name>:` */
  constructor(options: { name: string }) {
    this.#name = options.name;
  }

  /** The program name given to the constructor. */
  get name(): string {
    return this.#name;
  }

  #define<T>(
    spec: { name: string; kind: FlagKind; usage: string; defaultValue: T; notes?: FlagNotes },
    codec: FlagCodec<T>,
  ): Flag<T> {
    const { name } = spec;
    if (name === "" || name.startsWith("-") || name.includes("=")) {
      throw new TypeError(`Cannot define flag ${goQuote(name)}: bad flag name`);
    }
    if (this.#flags.has(name)) throw new Error(`Cannot define flag -${name}: flag redefined`);
    const flag = new DefinedFlag<T>({ ...spec, notes: spec.notes ?? {} }, codec);
    this.#flags.set(name, flag as DefinedFlag<unknown>);
    return flag;
  }

  /** Defines a string flag (Go `flag.String`); its default prints quoted when not empty. */
  string(name: string, defaultValue: string, usage: string, notes?: FlagNotes): Flag<string> {
    return this.#define({ name, kind: "string", usage, defaultValue, notes }, {
      parse: (text) => text,
      isBool: false,
      typeName: "string",
      defaultText: (v) => v === "" ? undefined : goQuote(v),
      valueText: (v) => v,
    });
  }

  /**
   * Defines a bool flag (Go `flag.Bool`): `-name` sets true, `-name=<bool>` sets the value given
   * (Go `strconv.ParseBool` spellings). `-name false` sets true and leaves `false` as the first
   * non-flag argument, which ends the flags, exactly like Go.
   */
  bool(name: string, defaultValue: boolean, usage: string, notes?: FlagNotes): Flag<boolean> {
    return this.#define({ name, kind: "bool", usage, defaultValue, notes }, {
      parse: (text) => {
        try {
          return parseGoBool(text);
        } catch {
          throw new Error(PARSE_ERROR);
        }
      },
      isBool: true,
      typeName: "",
      defaultText: (v) => v ? "true" : undefined,
      valueText: String,
    });
  }

  /**
   * Defines a signed 64-bit integer flag (Go `flag.Int`): decimal, `0x`, `0o`, `0b`, leading-`0`
   * octal and `_` separators. Values beyond 2^53 lose precision as JavaScript numbers.
   */
  int(name: string, defaultValue: number, usage: string, notes?: FlagNotes): Flag<number> {
    if (!Number.isInteger(defaultValue)) {
      throw new RangeError(
        `Cannot define flag -${name}: default ${defaultValue} is not an integer`,
      );
    }
    return this.#define({ name, kind: "int", usage, defaultValue, notes }, {
      parse: (text) => Number(parseGoInteger(text, true)),
      isBool: false,
      typeName: "int",
      defaultText: (v) => v === 0 ? undefined : String(v),
      valueText: String,
    });
  }

  /** Defines an unsigned 64-bit integer flag (Go `flag.Uint`): like {@link FlagSet.int}, no sign. */
  uint(name: string, defaultValue: number, usage: string, notes?: FlagNotes): Flag<number> {
    if (!Number.isInteger(defaultValue) || defaultValue < 0) {
      throw new RangeError(
        `Cannot define flag -${name}: default ${defaultValue} is not a non-negative integer`,
      );
    }
    return this.#define({ name, kind: "uint", usage, defaultValue, notes }, {
      parse: (text) => Number(parseGoInteger(text, false)),
      isBool: false,
      typeName: "uint",
      defaultText: (v) => v === 0 ? undefined : String(v),
      valueText: String,
    });
  }

  /** Defines a float64 flag (Go `flag.Float64`). */
  float(name: string, defaultValue: number, usage: string, notes?: FlagNotes): Flag<number> {
    return this.#define({ name, kind: "float", usage, defaultValue, notes }, {
      parse: (text) => parseGoFloat(text),
      isBool: false,
      typeName: "float",
      defaultText: (v) => v === 0 ? undefined : String(v),
      valueText: String,
    });
  }

  /**
   * Defines a duration flag (Go `flag.Duration`) holding milliseconds; the text uses Go syntax
   * (`15s`, `1m30s`, `300ms`) and the default prints as Go prints it (`5m0s`).
   */
  duration(name: string, defaultMs: number, usage: string, notes?: FlagNotes): Flag<number> {
    return this.#define({ name, kind: "duration", usage, defaultValue: defaultMs, notes }, {
      parse: (text) => {
        try {
          return parseGoDuration(text);
        } catch {
          throw new Error(PARSE_ERROR);
        }
      },
      isBool: false,
      typeName: "duration",
      defaultText: (v) => v === 0 ? undefined : formatGoDuration(v),
      valueText: formatGoDuration,
    });
  }

  /**
   * Defines a flag with its own parser (Go `flag.Var`), for map-like values such as
   * `--feature-gates=A=true,B=false`. The parser's error message becomes the reason in
   * `invalid value "<text>" for flag -<name>: <reason>`.
   */
  custom<T>(name: string, defaultValue: T, usage: string, spec: CustomFlagSpec<T>): Flag<T> {
    const notes = {
      deprecated: spec.deprecated,
      ignored: spec.ignored,
      classified: spec.classified,
    };
    return this.#define({ name, kind: "custom", usage, defaultValue, notes }, {
      parse: (text, current) => spec.parse(text, current),
      isBool: spec.isBool ?? false,
      typeName: spec.typeName ?? "value",
      defaultText: () => spec.defaultText,
      valueText: (v) => spec.format ? spec.format(v) : formatValue(v),
    });
  }

  /** The flag called `name`, or undefined. */
  lookup(name: string): Flag<unknown> | undefined {
    return this.#flags.get(name);
  }

  /** Every defined flag, sorted by name. */
  flags(): Flag<unknown>[] {
    return [...this.#flags.values()].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }

  /**
   * Parses `args` (the command line without the program name) with Go `flag` semantics.
   *
   * Stops at the first non-flag argument (a lone `-` counts as one) or after `--`, and returns
   * the arguments left. `-h`, `-help` and `--help` (with or without `=value`) give
   * `{ helpRequested: true }` unless a flag of that name is defined.
   *
   * @throws {FlagError} with Go's message for an unknown flag, a missing or bad value, or bad
   *   syntax such as `---x` or `-=x`. Flags before the bad one keep the values they were set to.
   */
  parse(args: readonly string[]): FlagParseResult {
    const rest = [...args];
    while (rest.length > 0) {
      const arg = rest[0]!;
      if (arg.length < 2 || arg[0] !== "-") break;
      let dashes = 1;
      if (arg[1] === "-") {
        dashes = 2;
        if (arg.length === 2) {
          rest.shift();
          break;
        }
      }
      let name = arg.slice(dashes);
      if (name.length === 0 || name[0] === "-" || name[0] === "=") {
        throw new FlagError(`bad flag syntax: ${arg}`);
      }
      rest.shift();

      let value: string | undefined;
      const eq = name.indexOf("=", 1);
      if (eq > 0) {
        value = name.slice(eq + 1);
        name = name.slice(0, eq);
      }

      const flag = this.#flags.get(name);
      if (flag === undefined) {
        if (name === "help" || name === "h") return { helpRequested: true };
        throw new FlagError(`flag provided but not defined: -${name}`);
      }

      if (flag.codec.isBool) {
        const text = value ?? "true";
        try {
          flag.setText(text);
        } catch (err) {
          const reason = errorText(err);
          throw new FlagError(
            value === undefined
              ? `invalid boolean flag ${name}: ${reason}`
              : `invalid boolean value ${goQuote(text)} for -${name}: ${reason}`,
            { cause: err },
          );
        }
        continue;
      }

      if (value === undefined) {
        if (rest.length === 0) throw new FlagError(`flag needs an argument: -${name}`);
        value = rest.shift()!;
      }
      try {
        flag.setText(value);
      } catch (err) {
        const reason = errorText(err);
        throw new FlagError(`invalid value ${goQuote(value)} for flag -${name}: ${reason}`, {
          cause: err,
        });
      }
    }
    return { helpRequested: false, args: rest };
  }

  /**
   * The defaults listing of Go's `PrintDefaults`: one entry per flag, sorted by name, each
   * `  -name type` then the tab-indented description, deprecation and no-effect notes, and
   * `(default X)` when the default is not the zero value. Ends with a newline.
   */
  printDefaults(): string {
    let out = "";
    for (const flag of this.flags() as DefinedFlag<unknown>[]) {
      const { typeName, usage } = unquoteUsage(flag);
      let line = `  -${flag.name}`;
      if (typeName !== "") line += ` ${typeName}`;
      // Go keeps one-letter bool flags on one line: "  -x" is at most 4 characters.
      line += line.length <= 4 ? "\t" : "\n    \t";
      let text = usage;
      if (flag.deprecated !== undefined) text += `\nDEPRECATED: ${flag.deprecated}`;
      if (flag.ignored !== undefined) text += `\nNo effect: ${flag.ignored}`;
      line += text.replaceAll("\n", "\n    \t");
      const defaultText = flag.codec.defaultText(flag.defaultValue);
      if (defaultText !== undefined) line += ` (default ${defaultText})`;
      out += `${line}\n`;
    }
    return out;
  }

  /** Go's default usage message: `Usage of <name>:` followed by {@link FlagSet.printDefaults}. */
  usage(): string {
    return `Usage of ${this.#name}:\n${this.printDefaults()}`;
  }
}
