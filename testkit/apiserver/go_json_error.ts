/**
 * The message Go's `encoding/json` gives for a body that is not valid JSON (its scanner's
 * `SyntaxError` texts), so the fake API server can word parse errors as kube-apiserver does, e.g.
 * `invalid character 'n' looking for beginning of object key string`.
 *
 * @module
 */

/** Go's `quoteChar`: the character in single quotes, escaped as a Go string would be. */
function quoteChar(c: string): string {
  if (c === "'") return "'\\''";
  if (c === '"') return "'\"'";
  const q = JSON.stringify(c);
  return `'${q.slice(1, -1)}'`;
}

class GoSyntaxError extends Error {}

function isSpace(c: string | undefined): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r";
}

/**
 * The `encoding/json` error message for `text`, or undefined when `text` is valid JSON.
 * Covers the scanner's syntax errors; every message is one Go can produce for the same input.
 */
export function goJsonSyntaxError(text: string): string | undefined {
  let i = 0;
  const end = (): never => {
    throw new GoSyntaxError("unexpected end of JSON input");
  };
  const bad = (context: string): never => {
    throw new GoSyntaxError(`invalid character ${quoteChar(text[i] ?? "")} ${context}`);
  };
  const skip = (): void => {
    while (isSpace(text[i])) i++;
  };
  const literal = (word: string): void => {
    for (let k = 0; k < word.length; k++, i++) {
      if (i >= text.length) end();
      if (text[i] !== word[k]) bad(`in literal ${word} (expecting ${quoteChar(word[k] ?? "")})`);
    }
  };
  const quoted = (): void => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) end();
      const c = text[i] ?? "";
      if (c === '"') {
        i++;
        return;
      }
      if (c < " ") bad("in string literal");
      if (c === "\\") {
        i++;
        if (i >= text.length) end();
        const e = text[i] ?? "";
        if (e === "u") {
          for (let k = 0; k < 4; k++) {
            i++;
            if (i >= text.length) end();
            if (!/[0-9a-fA-F]/.test(text[i] ?? "")) bad("in \\u hexadecimal character escape");
          }
        } else if (!'"\\/bfnrt'.includes(e)) {
          bad("in string escape code");
        }
      }
      i++;
    }
  };
  const digits = (): void => {
    while (/[0-9]/.test(text[i] ?? "")) i++;
  };
  const number = (): void => {
    if (text[i] === "-") {
      i++;
      if (i >= text.length) end();
      if (!/[0-9]/.test(text[i] ?? "")) bad("in numeric literal");
    }
    if (text[i] === "0") i++;
    else digits();
    if (text[i] === ".") {
      i++;
      if (i >= text.length) end();
      if (!/[0-9]/.test(text[i] ?? "")) bad("after decimal point in numeric literal");
      digits();
    }
    if (text[i] === "e" || text[i] === "E") {
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      if (i >= text.length) end();
      if (!/[0-9]/.test(text[i] ?? "")) bad("in exponent of numeric literal");
      digits();
    }
  };
  const value = (): void => {
    skip();
    if (i >= text.length) end();
    const c = text[i] ?? "";
    if (c === "{") {
      i++;
      skip();
      if (i >= text.length) end();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        skip();
        if (i >= text.length) end();
        if (text[i] !== '"') bad("looking for beginning of object key string");
        quoted();
        skip();
        if (i >= text.length) end();
        if (text[i] !== ":") bad("after object key");
        i++;
        value();
        skip();
        if (i >= text.length) end();
        if (text[i] === "}") {
          i++;
          return;
        }
        if (text[i] !== ",") bad("after object key:value pair");
        i++;
      }
    }
    if (c === "[") {
      i++;
      skip();
      if (i >= text.length) end();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (;;) {
        value();
        skip();
        if (i >= text.length) end();
        if (text[i] === "]") {
          i++;
          return;
        }
        if (text[i] !== ",") bad("after array element");
        i++;
      }
    }
    if (c === '"') return quoted();
    if (c === "-" || /[0-9]/.test(c)) return number();
    if (c === "t") return literal("true");
    if (c === "f") return literal("false");
    if (c === "n") return literal("null");
    bad("looking for beginning of value");
  };
  try {
    value();
    skip();
    if (i < text.length) bad("after top-level value");
    return undefined;
  } catch (err) {
    if (err instanceof GoSyntaxError) return err.message;
    throw err;
  }
}
