import assert from "node:assert/strict";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import {
  kubeProtosMissing,
  kubeProtosRequired,
  loadKubeProtos,
} from "../../testkit/kube_protos.ts";
import { compareServers, fakeServer } from "./protobuf_differences.ts";

const MISSING = kubeProtosMissing();
const IGNORE = MISSING !== undefined && !kubeProtosRequired();

Deno.test({
  name: "the protobuf probes decode every answer and find two in-memory servers alike" +
    (IGNORE ? ` (ignored: ${MISSING})` : ""),
  ignore: IGNORE,
  fn: async () => {
    const codec = loadKubeProtos();
    assert.ok(codec);
    await using a = await MemoryApiServer.start();
    await using b = await MemoryApiServer.start();
    const outcomes = await compareServers(fakeServer(a.url), fakeServer(b.url), codec);
    assert.deepEqual(outcomes.filter((o) => o.diffs.length > 0).map((o) => o.name), []);
    for (const o of outcomes) {
      assert.doesNotMatch(o.real.text, /<undecodable/, o.name);
    }
    const byName = new Map(outcomes.map((o) => [o.name, o.real]));
    assert.equal(byName.get("pb: get it")?.contentType, "application/vnd.kubernetes.protobuf");
    assert.equal(byName.get("pb: Accept text/html (406)")?.status, 406);
    assert.equal(byName.get("pb: patch with a protobuf body (415)")?.status, 415);
    assert.equal(byName.get("pb: update the Lease with a protobuf body")?.status, 200);
    assert.equal(byName.get("pb: create an Event with a protobuf body")?.status, 201);
    assert.match(
      byName.get("pb: watch list, bookmarks allowed, 1 s timeout")!.text,
      /initial-events-end/,
    );
  },
});
