/**
 * `@kubernetes/client-node` for the tests that check the fake API server against client-node's
 * own generated clients. Its node-fetch 2 dependency loads `whatwg-url` 5 and `tr46` 0.0.3, which
 * `require("punycode")`, a deprecated Node module; the runtime's deprecation warning is silenced
 * for the time of the import only, so test output carries no warning nobody can act on.
 *
 * @module
 */

import process from "node:process";

/** Loads client-node without the `punycode` deprecation warning. */
export async function importClientNode(): Promise<typeof import("@kubernetes/client-node")> {
  const before = process.noDeprecation;
  process.noDeprecation = true;
  try {
    return await import("@kubernetes/client-node");
  } finally {
    process.noDeprecation = before;
  }
}
