/**
 * Build step: turns `proto/csi.proto` into the JSON descriptor `proto/csi_descriptor.json` that
 * the test kit's grpc-js server loads (`testkit/csi/proto_loader.ts`) and that
 * `lib/csi/schema_test.ts` checks the attacher's schema table against, so nothing reads a
 * `.proto` file at run time.
 *
 * Run with `deno task proto`. `proto/generate_test.ts` fails when the committed JSON differs from
 * a fresh generation.
 *
 * Choices:
 * - Field names are converted to camelCase here (protobufjs `keepCase: false`), because
 *   `@grpc/proto-loader`'s `fromJSON` uses the names of the JSON as they are: `keepCase` only
 *   applies when it parses `.proto` text itself.
 * - `google/protobuf/wrappers.proto` (for `ProbeResponse.ready`) comes from protobufjs' bundled
 *   copy.
 * - `google/protobuf/descriptor.proto` is only needed by the spec's `extend` blocks that declare
 *   `csi_secret` and the `alpha_*` options. Those extension fields are dropped from the output;
 *   the option markers themselves stay on the fields and enum values as
 *   `"options": {"(csi_secret)": true}`, which protobufjs and proto-loader accept and ignore.
 *
 * @module
 */

import protobuf from "protobufjs";

/** The import that only the `extend` blocks need (see the module doc). */
const DESCRIPTOR_IMPORT = "google/protobuf/descriptor.proto";

/**
 * Parses CSI proto text and returns its JSON descriptor (protobufjs `INamespace` form).
 *
 * Guarantees: the result contains every message, enum and service of the source plus the
 * bundled well-known types it imports; every type reference in it resolves; no extension fields.
 *
 * @throws {Error} when the text does not parse, imports an unknown file or has an unresolvable
 *   type reference.
 */
export function generateDescriptor(protoSource: string): Record<string, unknown> {
  const root = new protobuf.Root();
  const parsed = protobuf.parse(protoSource, root, { keepCase: false });
  for (const file of [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])]) {
    if (file === DESCRIPTOR_IMPORT) continue;
    const bundled = protobuf.common.get(file);
    if (bundled === null) throw new Error(`csi.proto imports ${file}, which is not bundled`);
    root.addJSON(bundled.nested ?? {});
  }
  removeExtensionFields(root);
  root.resolveAll();
  return JSON.parse(JSON.stringify(root.toJSON())) as Record<string, unknown>;
}

/** Renders a descriptor as the committed file's text (stable for `deno fmt`). */
export function renderDescriptor(descriptor: Record<string, unknown>): string {
  return JSON.stringify(descriptor, null, 2) + "\n";
}

/** Removes `extend` fields (declared inside namespaces, not messages) everywhere in `ns`. */
function removeExtensionFields(ns: protobuf.NamespaceBase): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Field && nested.extend !== undefined) {
      ns.remove(nested);
    } else if (nested instanceof protobuf.Namespace) {
      removeExtensionFields(nested);
    }
  }
}

if (import.meta.main) {
  const dir = new URL(".", import.meta.url);
  const source = await Deno.readTextFile(new URL("csi.proto", dir));
  const out = new URL("csi_descriptor.json", dir);
  await Deno.writeTextFile(out, renderDescriptor(generateDescriptor(source)));
  console.log(`wrote ${out.pathname}`);
}
