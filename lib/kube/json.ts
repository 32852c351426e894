/**
 * Reading JSON the API server sent: a type guard for objects and a parse that tells "not JSON"
 * apart from every other failure.
 *
 * @module
 */

/** True for a JSON object (not an array, not null). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `text` parsed as JSON, or undefined when it is not JSON.
 *
 * @throws whatever `JSON.parse` throws other than a `SyntaxError` (e.g. a `RangeError` when the
 *   text is too large for the runtime).
 */
export function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}
