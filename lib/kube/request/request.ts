/**
 * One API request as {@link import("../client.ts").KubeClient} carries it through its steps (rate
 * limit, send, read, retry, report): what is asked, of which resource, at which URL, with which
 * body and signal. Built once per call, handed to every step instead of their separate arguments.
 *
 * @module
 */

import type { LeaseFence } from "../../lease_fence.ts";
import type { Resource } from "../api.ts";
import type { RequestUrl } from "../../wire/http1/api.ts";

/** A request body and its content type. */
export interface RequestBody {
  /** `Content-Type` header, e.g. `application/merge-patch+json`. */
  readonly contentType: string;
  /** The body text (JSON). */
  readonly data: string;
}

/** One API request. */
export interface RequestContext {
  /** HTTP method: `GET`, `POST`, `PUT`, `PATCH`, `DELETE`. */
  readonly method: string;
  /** API verb: get, list, watch, create, update, patch, delete. */
  readonly verb: string;
  /** The resource asked for. */
  readonly resource: Resource;
  /** `status` or "". */
  readonly subresource: string;
  /** The full request URL, query included (`./request_url.ts`). */
  readonly url: RequestUrl;
  /** The body, for create, update and patch. */
  readonly body?: RequestBody;
  /** The caller's signal: aborting it ends the request with its reason. */
  readonly signal?: AbortSignal;
  /** The write's lease fence ({@link import("../api.ts").ObjectOptions.fence}); none for reads. */
  readonly fence?: LeaseFence;
}

/** Go's `url.Error` operation name of a method: `Get`, `Patch`, … */
export function goOp(method: string): string {
  return method.charAt(0) + method.slice(1).toLowerCase();
}

/**
 * A failure message worded as Go's `url.Error` words it, which is what client-go's errors say:
 * `Get "https://host/api/v1/...": <text>`.
 */
export function requestFailure(ctx: Pick<RequestContext, "method" | "url">, text: string): string {
  return `${goOp(ctx.method)} "${ctx.url.href}": ${text}`;
}
