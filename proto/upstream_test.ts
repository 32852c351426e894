/**
 * `proto/csi.proto` is a subset of the CSI spec's csi.proto at v1.13.0: every message and enum
 * it keeps must be the spec's, field by field (name, number, type, label, oneof, options) and
 * value by value, with the same reserved numbers. The spec's file is not in this repository; the
 * test reads it from the Go module cache (`go mod download
 * github.com/container-storage-interface/spec@v1.13.0`) and is skipped where it is absent.
 */

import assert from "node:assert/strict";
import { generateDescriptor } from "./generate.ts";
import ours from "./csi_descriptor.json" with { type: "json" };

const MODULE_CACHE = Deno.env.get("GOMODCACHE") ?? `${Deno.env.get("HOME") ?? ""}/go/pkg/mod`;
const SPEC = `${MODULE_CACHE}/github.com/container-storage-interface/spec@v1.13.0/csi.proto`;

function present(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

// deno-lint-ignore no-explicit-any
type Json = any;

/** Every message and enum of a descriptor by full name. */
function types(ns: Json, prefix = "", out = new Map<string, Json>()): Map<string, Json> {
  for (const [name, node] of Object.entries(ns.nested ?? {}) as [string, Json][]) {
    const full = prefix === "" ? name : `${prefix}.${name}`;
    if (node.fields !== undefined || node.values !== undefined) out.set(full, node);
    types(node, full, out);
  }
  return out;
}

Deno.test({
  name: "proto/csi.proto keeps the CSI spec v1.13.0's messages and enums as the spec has them",
  ignore: !present(SPEC),
  fn: () => {
    const upstream = types(generateDescriptor(Deno.readTextFileSync(SPEC)));
    const subset = types(ours);
    assert.ok(subset.size > 20, "the subset has the attacher's messages");
    for (const [name, node] of subset) {
      const spec = upstream.get(name);
      assert.ok(spec !== undefined, `${name} is in the spec`);
      const keep = (n: Json) => ({
        fields: n.fields,
        values: n.values,
        oneofs: n.oneofs,
        reserved: n.reserved,
        valuesOptions: n.valuesOptions,
      });
      assert.deepEqual(keep(node), keep(spec), name);
    }
  },
});
