import assert from "node:assert/strict";
import { goJsonSyntaxError } from "./go_json_error.ts";

Deno.test("goJsonSyntaxError words errors as Go's encoding/json does", () => {
  const cases: [string, string | undefined][] = [
    ['{"a": [1, 2.5e3, true, null, "x\\u00e9"]}', undefined],
    ["{not json", "invalid character 'n' looking for beginning of object key string"],
    ["nope", "invalid character 'o' in literal null (expecting 'u')"],
    ['{"a":}', "invalid character '}' looking for beginning of value"],
    ['{"a" 1}', "invalid character '1' after object key"],
    ['{"a":1 "b"}', "invalid character '\"' after object key:value pair"],
    ["[1 2]", "invalid character '2' after array element"],
    ["{} x", "invalid character 'x' after top-level value"],
    ['{"a":1', "unexpected end of JSON input"],
    ["", "unexpected end of JSON input"],
    ["-x", "invalid character 'x' in numeric literal"],
    ["'a'", "invalid character '\\'' looking for beginning of value"],
  ];
  for (const [text, want] of cases) assert.equal(goJsonSyntaxError(text), want, text);
});
