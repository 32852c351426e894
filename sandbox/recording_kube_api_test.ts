import assert from "node:assert/strict";
import { ApiError, type KubeApi, VOLUME_ATTACHMENTS } from "../lib/kube/api.ts";
import type { KubeObject } from "../lib/kube/types.ts";
import { type ApiCallRecord, recordingKubeApi } from "./recording_kube_api.ts";

/** A KubeApi whose patch fails with 409 and whose other calls succeed. */
function fakeApi(): KubeApi {
  const obj = <T>(name: string) => ({ metadata: { name } }) as unknown as T;
  return {
    list: () => Promise.resolve({ items: [], resourceVersion: "1" }),
    watch: () => ({
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.resolve({ done: true, value: undefined }),
      }),
    }),
    get: (_res, name) => Promise.resolve(obj(name)),
    create: <T extends KubeObject>(_res: unknown, o: T) => Promise.resolve(o),
    update: <T extends KubeObject>(_res: unknown, o: T) => Promise.resolve(o),
    patch: () => Promise.reject(new ApiError(409, "Conflict", "the object has been modified")),
    delete: () => Promise.resolve(),
  };
}

Deno.test("recordingKubeApi() reports each call once it settled, with its outcome", async () => {
  const records: ApiCallRecord[] = [];
  let started = 0;
  const api = recordingKubeApi(fakeApi(), {
    onStart: () => started++,
    onFinish: (r) => records.push(r),
  });
  const got = await api.get(VOLUME_ATTACHMENTS, "va1");
  assert.equal(got.metadata.name, "va1");
  await assert.rejects(
    api.patch(VOLUME_ATTACHMENTS, "va1", { type: "merge", body: { a: 1 } }, {
      subresource: "status",
    }),
    (err: unknown) => err instanceof ApiError && err.code === 409,
  );
  await api.list(VOLUME_ATTACHMENTS);
  for await (
    const _ of api.watch(VOLUME_ATTACHMENTS, {
      resourceVersion: "1",
      timeoutSeconds: 1,
      allowWatchBookmarks: false,
      signal: new AbortController().signal,
    })
  ) {
    assert.fail("no events expected");
  }
  assert.equal(started, 3, "watches are not counted");
  assert.deepEqual(records, [
    {
      verb: "get",
      resource: "volumeattachments",
      namespace: "",
      name: "va1",
      subresource: "",
      outcome: { ok: true },
    },
    {
      verb: "patch",
      resource: "volumeattachments",
      namespace: "",
      name: "va1",
      subresource: "status",
      patch: { type: "merge", body: { a: 1 } },
      outcome: {
        ok: false,
        code: 409,
        reason: "Conflict",
        message: "the object has been modified",
      },
    },
    {
      verb: "list",
      resource: "volumeattachments",
      namespace: "",
      name: "",
      subresource: "",
      outcome: { ok: true },
    },
  ]);
});
