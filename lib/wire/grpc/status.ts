/**
 * gRPC status codes and the error a failed call gives: the one code table of the project.
 *
 * The numbers are those of grpc `doc/statuscodes.md`; the names are Go's `codes.Code.String()`
 * (grpc-go `codes/code_string.go`), which is how the Go sidecars print and label them
 * (`DeadlineExceeded`, not `DEADLINE_EXCEEDED`). A number outside the table prints as Go prints
 * it: `Code(17)`.
 *
 * @module
 */

/** gRPC status codes by Go name (grpc-go `codes/codes.go`). */
export const GrpcCode = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;

/** The name of a code of {@link GrpcCode}. */
export type GrpcCodeName = keyof typeof GrpcCode;

/** The names of the codes 0–16, indexed by number. */
export const GRPC_CODE_NAMES: readonly GrpcCodeName[] = Object.freeze(
  (Object.keys(GrpcCode) as GrpcCodeName[]).sort((a, b) => GrpcCode[a] - GrpcCode[b]),
);

/**
 * The Go name of a status code: `DeadlineExceeded` for 4, `Code(17)` for a number Go's table
 * does not have (grpc-go `codes.Code.String()`).
 *
 * @example
 * ```ts
 * import { grpcCodeName } from "./status.ts";
 * grpcCodeName(4); // "DeadlineExceeded"
 * grpcCodeName(4294967295); // "Code(4294967295)"
 * ```
 */
export function grpcCodeName(code: number): string {
  return GRPC_CODE_NAMES[code] ?? `Code(${code})`;
}

/**
 * A call that ended with a gRPC status other than OK. `message` reads as grpc-go's
 * `status.Error(code, details).Error()`: `rpc error: code = DeadlineExceeded desc = context
 * deadline exceeded`.
 */
export class GrpcStatusError extends Error {
  /** The status code, a uint32 (0–16 in practice; any number the peer sent otherwise). */
  readonly code: number;
  /** The status message (`grpc-message`, percent-decoded), or the client's own text. */
  readonly details: string;

  constructor(code: number, details: string, options?: ErrorOptions) {
    super(`rpc error: code = ${grpcCodeName(code)} desc = ${details}`, options);
    this.name = "GrpcStatusError";
    this.code = code;
    this.details = details;
  }
}
