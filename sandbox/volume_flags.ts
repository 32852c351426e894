/**
 * The flags `sandbox` and `sandbox check` share for the objects they make: the volume context and
 * the publish Secret, with the `key=value,...` and list syntax they are written in.
 *
 * @module
 */

import type { Flag, FlagSet } from "../lib/cli/flags.ts";

/**
 * Parses `k=v,k2=v2` into a copy of `current`; later keys win.
 *
 * @throws {Error} for a part without `=` or with an empty key.
 */
export function parseKeyValues(
  text: string,
  current: Record<string, string>,
): Record<string, string> {
  const out = { ...current };
  for (const part of text.split(",")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    if (eq <= 0) throw new Error(`expected key=value, got ${JSON.stringify(part)}`);
    out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

/** Parses a comma-separated list; empty items are dropped. */
export function parseList(text: string): string[] {
  return text.split(",").filter((s) => s !== "");
}

/**
 * Defines `--volume-attributes` (`spec.csi.volumeAttributes`) and `--secret` (the publish Secret's
 * data, described by `secretHelp`) on `set`.
 */
export function defineVolumeFlags(set: FlagSet, secretHelp: string): {
  volumeAttributes: Flag<Record<string, string>>;
  secret: Flag<Record<string, string> | undefined>;
} {
  return {
    volumeAttributes: set.custom<Record<string, string>>(
      "volume-attributes",
      {},
      "Volume context as key=value,... (spec.csi.volumeAttributes).",
      { parse: parseKeyValues, typeName: "key=value,..." },
    ),
    secret: set.custom<Record<string, string> | undefined>(
      "secret",
      undefined,
      secretHelp,
      { parse: (text, current) => parseKeyValues(text, current ?? {}), typeName: "key=value,..." },
    ),
  };
}
