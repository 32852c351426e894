import assert from "node:assert/strict";
import { parseListOptions, validateListOptions } from "./list_options.ts";

/** The messages of the causes for a query, as `field: message`. */
function errors(query: Record<string, string>): string[] {
  return validateListOptions(parseListOptions(query)).map((c) => `${c.field}: ${c.message}`);
}

Deno.test("validateListOptions gives kube-apiserver's field errors", () => {
  // Each expectation is the real server's (v1.34.4) answer to the same query.
  assert.deepEqual(errors({ resourceVersion: "0", resourceVersionMatch: "Exact" }), [
    'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
  ]);
  assert.deepEqual(
    errors({ resourceVersion: "5", resourceVersionMatch: "NotOlderThan", continue: "abc" }),
    ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"],
  );
  assert.deepEqual(
    errors({
      watch: "true",
      sendInitialEvents: "true",
      allowWatchBookmarks: "true",
      resourceVersionMatch: "NotOlderThan",
      continue: "abc",
    }),
    ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"],
  );
  assert.deepEqual(errors({ resourceVersion: "5", resourceVersionMatch: "Bogus" }), [
    'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""',
  ]);
  assert.deepEqual(errors({ resourceVersion: "5", resourceVersionMatch: "Exact" }), []);
  assert.deepEqual(errors({ watch: "true", resourceVersion: "7" }), []);
});

Deno.test('parseListOptions defaults a watch from "" or "0" to a watch list, and reads Go booleans', () => {
  for (const resourceVersion of ["", "0"]) {
    const opts = parseListOptions({ watch: "1", resourceVersion });
    assert.equal(opts.sendInitialEvents, true);
    assert.equal(opts.resourceVersionMatch, "NotOlderThan");
  }
  // Not for a numbered resourceVersion, a list, or when either option is given.
  assert.equal(
    parseListOptions({ watch: "true", resourceVersion: "9" }).sendInitialEvents,
    undefined,
  );
  assert.equal(parseListOptions({}).sendInitialEvents, undefined);
  assert.equal(
    parseListOptions({ watch: "true", sendInitialEvents: "False" }).sendInitialEvents,
    false,
  );
  assert.equal(
    parseListOptions({ watch: "true", sendInitialEvents: "false" }).resourceVersionMatch,
    "",
  );
  // Only 0, f and false (any case) are false; an empty value is true.
  for (
    const [value, want] of [["0", false], ["F", false], ["FALSE", false], ["", true], [
      "no",
      true,
    ]] as const
  ) {
    assert.equal(parseListOptions({ watch: value }).watch, want, value);
  }
});
