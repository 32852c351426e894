/**
 * Message descriptors: what the protobuf wire codec ({@link import("./protowire.ts")}) needs to
 * know of a message type to encode and decode it. A product module builds its table of messages
 * from these types (the CSI messages: `lib/csi/schema.ts`) and may extend them with facts of its
 * own (which fields are secret).
 *
 * The subset is proto3 as the CSI spec uses it: `string`, `bool`, `int32`, `int64`, enums,
 * messages, `repeated` of any of these, `map<string, string>`, and oneofs.
 *
 * @module
 */

/** What a field holds. `map` is `map<string, string>`, the only map type supported. */
export type FieldKind = "string" | "bool" | "int32" | "int64" | "enum" | "message" | "map";

/** One field of a message, as the codec reads it. */
export interface FieldDescriptor {
  /** camelCase name, as in JS objects. */
  readonly name: string;
  /** The field number (1 to 2^29-1). */
  readonly number: number;
  readonly kind: FieldKind;
  readonly repeated: boolean;
  /** Name of the member's oneof, e.g. `accessType`. */
  readonly oneof?: string;
  /** For `message` fields: the message type. */
  readonly message?: MessageDescriptor;
  /**
   * For `enum` fields: value names by number; a hole where the enum has no value (a reserved
   * number). A number without a name decodes as the number.
   */
  readonly enumValues?: readonly string[];
}

/** One message type, as the codec reads it. */
export interface MessageDescriptor {
  /** Fully qualified name without a leading dot, e.g. `csi.v1.ControllerPublishVolumeRequest`. */
  readonly name: string;
  /** Fields in field-number order. */
  readonly fields: readonly FieldDescriptor[];
  /** Fields by number. */
  readonly byNumber: ReadonlyMap<number, FieldDescriptor>;
}
