/**
 * JSON values that keep every object member in document order, duplicates included, so that the
 * fake API server can report duplicate and unknown fields in the order kube-apiserver's strict
 * decoder meets them. `JSON.parse` keeps only the last of duplicate members.
 *
 * @module
 */

/** A JSON value with its object members in document order, duplicates kept. */
export type OrderedNode =
  | { type: "object"; members: [string, OrderedNode][] }
  | { type: "array"; items: OrderedNode[] }
  | { type: "scalar"; value: string | number | boolean | null };

const NUMBER = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/**
 * Parses JSON text into an {@link OrderedNode}.
 *
 * @throws {SyntaxError} when `text` is not valid JSON.
 */
export function parseOrderedJson(text: string): OrderedNode {
  // Validate first: the scanner below then only needs to find token boundaries.
  JSON.parse(text);
  let i = 0;
  const skip = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const string = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): OrderedNode => {
    skip();
    const c = text[i];
    if (c === "{") {
      i++;
      const members: [string, OrderedNode][] = [];
      skip();
      if (text[i] === "}") {
        i++;
        return { type: "object", members };
      }
      for (;;) {
        skip();
        const key = string();
        skip();
        i++; // ':'
        members.push([key, value()]);
        skip();
        if (text[i++] === "}") return { type: "object", members };
      }
    }
    if (c === "[") {
      i++;
      const items: OrderedNode[] = [];
      skip();
      if (text[i] === "]") {
        i++;
        return { type: "array", items };
      }
      for (;;) {
        items.push(value());
        skip();
        if (text[i++] === "]") return { type: "array", items };
      }
    }
    if (c === '"') return { type: "scalar", value: string() };
    if (text.startsWith("true", i)) {
      i += 4;
      return { type: "scalar", value: true };
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return { type: "scalar", value: false };
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return { type: "scalar", value: null };
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    i += m?.[0].length ?? 0;
    return { type: "scalar", value: Number(m?.[0]) };
  };
  return value();
}

/** The {@link OrderedNode} of a plain JSON value (which has no duplicate members). */
export function orderedFromValue(value: unknown): OrderedNode {
  if (Array.isArray(value)) return { type: "array", items: value.map(orderedFromValue) };
  if (typeof value === "object" && value !== null) {
    return {
      type: "object",
      members: Object.entries(value).map(([k, v]) => [k, orderedFromValue(v)]),
    };
  }
  if (typeof value === "string" || typeof value === "boolean" || value === null) {
    return { type: "scalar", value };
  }
  if (typeof value === "number") return { type: "scalar", value };
  return { type: "scalar", value: null };
}
