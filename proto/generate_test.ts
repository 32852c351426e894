import assert from "node:assert/strict";
import { generateDescriptor, renderDescriptor } from "./generate.ts";

const dir = new URL(".", import.meta.url);

Deno.test("csi_descriptor.json equals a fresh generation from csi.proto", async () => {
  const source = await Deno.readTextFile(new URL("csi.proto", dir));
  const committed = await Deno.readTextFile(new URL("csi_descriptor.json", dir));
  assert.equal(
    committed,
    renderDescriptor(generateDescriptor(source)),
    "proto/csi_descriptor.json is stale: run `deno task proto` and commit the result",
  );
});

Deno.test("generateDescriptor() converts names to camelCase and keeps csi_secret markers", () => {
  const out = generateDescriptor(`
    syntax = "proto3";
    package t;
    import "google/protobuf/descriptor.proto";
    extend google.protobuf.FieldOptions { bool csi_secret = 1059; }
    message M { map<string, string> secret_map = 1 [(csi_secret) = true]; string volume_id = 2; }
  `);
  const m = (out as { nested: { t: { nested: { M: { fields: Record<string, unknown> } } } } })
    .nested.t.nested.M;
  assert.deepEqual(Object.keys(m.fields), ["secretMap", "volumeId"]);
  assert.deepEqual(m.fields.secretMap, {
    keyType: "string",
    type: "string",
    id: 1,
    options: { "(csi_secret)": true },
  });
  assert.equal(JSON.stringify(out).includes("csiSecret"), false, "extension field dropped");
});

Deno.test("generateDescriptor() rejects an unresolvable type and an unbundled import", () => {
  assert.throws(
    () => generateDescriptor(`syntax = "proto3"; package t; message M { Missing x = 1; }`),
    /no such Type or Enum .Missing./,
  );
  assert.throws(
    () => generateDescriptor(`syntax = "proto3"; package t; import "other/file.proto";`),
    /other\/file\.proto, which is not bundled/,
  );
});
