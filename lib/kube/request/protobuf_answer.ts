/**
 * Kubernetes protobuf answers (`../wire/kubernetes/`) for the client: which requests ask for
 * them, how an answer says it is one, and its body as the JSON form or an {@link ApiError}.
 *
 * As the Go csi-attacher (`cmd/csi-attacher/main.go`: `config.ContentType =
 * runtime.ContentTypeProtobuf`, and client-go's `rest.ClientContentConfig` then sends
 * `Accept: application/vnd.kubernetes.protobuf, application/json` with every request), every
 * request on the kinds the decoder knows (VolumeAttachments, PersistentVolumes, CSINodes and
 * Leases: gets, lists, watches and watch lists, and the answers of patches and updates) asks for
 * protobuf with JSON as the fallback: a server or proxy that answers JSON is read as before, by
 * the answer's `Content-Type`. What is sent stays JSON: patches are JSON documents, and the
 * Lease update body is small (`ARCHITECTURE.md`, "Kubernetes protobuf", says why). Events stay
 * JSON both ways: the decoder does not know them.
 *
 * @module
 */

import { ApiError, type Resource } from "../api.ts";
import {
  decodeObject,
  KubeProtobufError,
  PROTOBUF_MEDIA_TYPE,
} from "../../wire/kubernetes/decode.ts";
import { type RequestContext, requestFailure } from "./request.ts";
import { errorFromStatus, reasonForCode } from "./status_errors.ts";
import type { Status } from "../types.ts";

/** The `Accept` of a request that may be answered in protobuf. */
export const PROTOBUF_ACCEPT = `${PROTOBUF_MEDIA_TYPE}, application/json`;

/** The resources (`group/plural`) whose answers may be protobuf: those the decoder knows. */
const PROTOBUF_RESOURCES: ReadonlySet<string> = new Set([
  "storage.k8s.io/volumeattachments",
  "/persistentvolumes",
  "storage.k8s.io/csinodes",
  "coordination.k8s.io/leases",
]);

/**
 * Whether a `method` request on `res` asks for protobuf: a GET, PATCH or PUT of the decoder's
 * kinds. A DELETE's answer is not read, and a POST creates only Events here.
 */
export function asksForProtobuf(method: string, res: Resource): boolean {
  return (method === "GET" || method === "PATCH" || method === "PUT") &&
    PROTOBUF_RESOURCES.has(`${res.group}/${res.plural}`);
}

/**
 * Whether a `Content-Type` is Kubernetes protobuf (`application/vnd.kubernetes.protobuf`, with
 * or without parameters such as `;stream=watch`).
 */
export function isProtobuf(contentType: string | null): boolean {
  if (contentType === null) return false;
  const semi = contentType.indexOf(";");
  const type = (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return type === PROTOBUF_MEDIA_TYPE;
}

/**
 * A successful protobuf answer as its JSON form.
 *
 * @throws {ApiError} (`InvalidResponse`) when the body is not an object the decoder reads.
 */
export function protobufBody(ctx: RequestContext, code: number, bytes: Uint8Array): unknown {
  try {
    return decodeObject(bytes);
  } catch (err) {
    if (!(err instanceof KubeProtobufError)) throw err;
    throw new ApiError(
      code,
      "InvalidResponse",
      requestFailure(ctx, `the answer is not Kubernetes protobuf: ${err.message}`),
      { cause: err },
    );
  }
}

/**
 * The {@link ApiError} of an error answer in protobuf: its `metav1.Status` as a JSON Status
 * gives it (`./status_errors.ts`); a body that is not a protobuf Status gives the reason of the
 * code, as a non-Status JSON body does.
 */
export function errorFromProtobuf(code: number, bytes: Uint8Array): ApiError {
  let status: unknown;
  try {
    status = decodeObject(bytes);
  } catch {
    status = undefined;
  }
  if (typeof status === "object" && status !== null && (status as Status).kind === "Status") {
    return errorFromStatus(code, status as Status);
  }
  return new ApiError(
    code,
    reasonForCode(code),
    `the server responded with HTTP ${code} in protobuf that is not a Status`,
  );
}
