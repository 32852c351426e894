/**
 * A {@link KubeApi} decorator that reports every finished request (except watches) with its
 * outcome, so that the sandbox can print the attacher's API calls in the order they completed,
 * interleaved with its CSI calls.
 *
 * @module
 */

import { ApiError, type KubeApi, type Patch, type Resource } from "../lib/kube/api.ts";

/** How a request ended. */
export type ApiCallOutcome =
  | { ok: true }
  /** `code` 0 means no answer came (connection error). */
  | { ok: false; code: number; reason: string; message: string };

/** One finished request. */
export interface ApiCallRecord {
  verb: "get" | "list" | "create" | "update" | "patch" | "delete";
  /** Plural resource name, e.g. `volumeattachments`. */
  resource: string;
  namespace: string;
  /** Object name; "" for list. */
  name: string;
  subresource: "" | "status";
  /** The patch sent, for `patch`. */
  patch?: Patch;
  outcome: ApiCallOutcome;
}

function outcomeOf(err: unknown): ApiCallOutcome {
  if (err instanceof ApiError) {
    return { ok: false, code: err.code, reason: err.reason, message: err.message };
  }
  return {
    ok: false,
    code: 0,
    reason: "Error",
    message: err instanceof Error ? err.message : String(err),
  };
}

/** What {@link recordingKubeApi} reports. */
export interface RecordingHooks {
  /** Called synchronously when a request (not a watch) is made. */
  onStart?(): void;
  /** Called once the request settled, before the caller sees the result. */
  onFinish(record: ApiCallRecord): void;
}

/**
 * Wraps `api`: every call is passed through unchanged (same result, same rejection); `onStart`
 * is told when it is made and `onFinish` receives its record once it settles. Watches are
 * passed through without reports.
 */
export function recordingKubeApi(api: KubeApi, hooks: RecordingHooks): KubeApi {
  async function track<T>(
    base: Omit<ApiCallRecord, "outcome">,
    call: () => Promise<T>,
  ): Promise<T> {
    hooks.onStart?.();
    try {
      const result = await call();
      hooks.onFinish({ ...base, outcome: { ok: true } });
      return result;
    } catch (err) {
      hooks.onFinish({ ...base, outcome: outcomeOf(err) });
      throw err;
    }
  }
  const where = (res: Resource, namespace: string | undefined, name: string) => ({
    resource: res.plural,
    namespace: namespace ?? "",
    name,
  });
  return {
    list: (res, opts) =>
      track(
        { verb: "list", ...where(res, opts?.namespace, ""), subresource: "" },
        () => api.list(res, opts),
      ),
    watch: (res, opts) => api.watch(res, opts),
    get: (res, name, opts) =>
      track(
        { verb: "get", ...where(res, opts?.namespace, name), subresource: "" },
        () => api.get(res, name, opts),
      ),
    create: (res, obj, opts) =>
      track(
        {
          verb: "create",
          ...where(res, opts?.namespace ?? obj.metadata.namespace, obj.metadata.name),
          subresource: "",
        },
        () => api.create(res, obj, opts),
      ),
    update: (res, obj, opts) =>
      track(
        {
          verb: "update",
          ...where(res, opts?.namespace ?? obj.metadata.namespace, obj.metadata.name),
          subresource: "",
        },
        () => api.update(res, obj, opts),
      ),
    patch: (res, name, patch, opts) =>
      track(
        {
          verb: "patch",
          ...where(res, opts?.namespace, name),
          subresource: opts?.subresource ?? "",
          patch,
        },
        () => api.patch(res, name, patch, opts),
      ),
    delete: (res, name, opts) =>
      track(
        { verb: "delete", ...where(res, opts?.namespace, name), subresource: "" },
        () => api.delete(res, name, opts),
      ),
  };
}
