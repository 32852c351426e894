/**
 * The CSI schema table (`lib/csi/schema.ts`) seen whole, for tests and fuzz targets: every
 * message schema the methods of `proto/csi.proto`'s services reach, and whether a field is
 * `csi_secret`. The attacher itself only looks schemas up by name.
 *
 * @module
 */

import descriptor from "../../proto/csi_descriptor.json" with { type: "json" };
import {
  csiMethod,
  type CsiServiceName,
  type MessageSchema,
  messageSchema,
} from "../../lib/csi/schema.ts";

/** The method names of a service in the descriptor generated from `proto/csi.proto`. */
export function describedMethods(service: CsiServiceName): string[] {
  const services = descriptor.nested.csi.nested.v1.nested as Record<
    string,
    { methods?: Record<string, unknown> }
  >;
  return Object.keys(services[service]?.methods ?? {});
}

/**
 * Every message schema the described methods reach (requests, responses and the messages of
 * their fields, transitively), by fully qualified name.
 */
export function csiMessages(): ReadonlyMap<string, MessageSchema> {
  const seen = new Map<string, MessageSchema>();
  const walk = (schema: MessageSchema): void => {
    if (seen.has(schema.name)) return;
    seen.set(schema.name, schema);
    for (const field of schema.fields) if (field.message !== undefined) walk(field.message);
  };
  for (const service of ["Identity", "Controller"] as const) {
    for (const name of describedMethods(service)) {
      const method = csiMethod(service, name);
      walk(method.requestType);
      walk(method.responseType);
    }
  }
  return seen;
}

/** Whether `field` (camelCase) of message `messageName` (`csi.v1.X`) is marked `csi_secret`. */
export function isSecretField(messageName: string, field: string): boolean {
  try {
    return messageSchema(messageName).byName.get(field)?.secret ?? false;
  } catch {
    return false; // a message the schema does not have
  }
}
