import assert from "node:assert/strict";
import { csiMethod, type FieldSchema, type MessageSchema, messageSchema } from "./schema.ts";
import { capLogText, logGrpcRequest, logGrpcResult, STRIPPED, stripSecrets } from "./grpc_log.ts";
import { FakeLogger } from "../../testkit/fakes/fake_logger.ts";

const publish = csiMethod("Controller", "ControllerPublishVolume");
const unpublish = csiMethod("Controller", "ControllerUnpublishVolume");
const listVolumes = csiMethod("Controller", "ListVolumes");

const SECRET = "hunter2-very-secret";

const publishRequest = {
  volumeId: "vol-1",
  nodeId: "node-1",
  volumeCapability: {
    mount: { fsType: "ext4", mountFlags: [] },
    accessMode: { mode: "SINGLE_NODE_WRITER" },
  },
  readonly: false,
  secrets: { password: SECRET, user: "admin" },
  volumeContext: { pool: "fast" },
};

Deno.test("stripSecrets() replaces a secret map as a whole and keeps other fields", () => {
  const stripped = stripSecrets(publish.requestType, publishRequest);
  assert.deepEqual(stripped, { ...publishRequest, secrets: STRIPPED });
  assert.equal(publishRequest.secrets.password, SECRET, "input not modified");
  assert.deepEqual(stripSecrets(unpublish.requestType, { volumeId: "v", secrets: { a: SECRET } }), {
    volumeId: "v",
    secrets: STRIPPED,
  });
});

Deno.test("stripSecrets() leaves empty secrets and messages without secrets alone", () => {
  assert.deepEqual(stripSecrets(unpublish.requestType, { volumeId: "v", secrets: {} }), {
    volumeId: "v",
    secrets: {},
  });
  const list = {
    entries: [{ volume: { volumeId: "v", volumeContext: { a: "b" } } }],
    nextToken: "",
  };
  assert.deepEqual(stripSecrets(listVolumes.responseType, list), list);
});

Deno.test("stripSecrets() finds secrets at any depth: nested and repeated messages", () => {
  // A wrapper message whose fields hold the CSI request in every position a message can be.
  const request = messageSchema("csi.v1.ControllerPublishVolumeRequest");
  const fields: FieldSchema[] = [
    { name: "one", number: 1, kind: "message", repeated: false, secret: false, message: request },
    { name: "many", number: 2, kind: "message", repeated: true, secret: false, message: request },
  ];
  const wrapper: MessageSchema = {
    name: "test.Wrapper",
    fields,
    byName: new Map(fields.map((f) => [f.name, f])),
    byNumber: new Map(fields.map((f) => [f.number, f])),
  };
  const out = stripSecrets(wrapper, {
    one: publishRequest,
    many: [publishRequest, publishRequest],
    extra: "kept",
  });
  assert.equal(JSON.stringify(out).includes(SECRET), false);
  assert.equal(JSON.stringify(out).split(STRIPPED).length - 1, 3);
  assert.equal((out as { extra: string }).extra, "kept");
});

Deno.test("capLogText() caps long text with Go's suffix and leaves short text alone", () => {
  assert.equal(capLogText("abcdef", 3), "abc [response body too large, log capped to 3 chars]");
  assert.equal(capLogText("abc", 3), "abc");
  assert.equal(capLogText("abcdef", 0), "abcdef");
  assert.equal(capLogText("abcdef", -1), "abcdef");
});

Deno.test("logGrpcRequest() logs the sanitized request at V(5) and never the secret", () => {
  const log = new FakeLogger(5);
  logGrpcRequest(log, publish, publishRequest);
  assert.equal(log.lines.length, 1);
  const line = log.lines[0]!;
  assert.equal(line.v, 5);
  assert.equal(line.msg, "GRPC call");
  assert.equal(line.fields.method, "/csi.v1.Controller/ControllerPublishVolume");
  assert.deepEqual(JSON.parse(String(line.fields.request)), {
    ...publishRequest,
    secrets: STRIPPED,
  });
  assert.equal(log.text().includes(SECRET), false);
  assert.equal(log.text().includes("admin"), false, "no value of a secret map leaks");
});

Deno.test("logGrpcRequest() and logGrpcResult() write nothing below V(5)", () => {
  const log = new FakeLogger(4);
  logGrpcRequest(log, publish, publishRequest);
  logGrpcResult(log, publish, { response: {} }, -1);
  logGrpcResult(log, publish, { error: new Error("x") }, -1);
  assert.deepEqual(log.lines, []);
});

Deno.test("logGrpcResult() caps the response JSON to maxLogLength", () => {
  const log = new FakeLogger(5);
  const response = { publishContext: { devicePath: "/dev/" + "x".repeat(100) } };
  logGrpcResult(log, publish, { response }, 20);
  logGrpcResult(log, publish, { response }, -1);
  const [capped, full] = log.withMessage("GRPC response");
  const json = JSON.stringify(response);
  assert.equal(
    capped!.fields.response,
    json.slice(0, 20) + " [response body too large, log capped to 20 chars]",
  );
  assert.equal(full!.fields.response, json);
});

Deno.test("logGrpcResult() logs an error as GRPC error with its message", () => {
  const log = new FakeLogger(5);
  logGrpcResult(log, publish, { error: new Error("rpc error: code = NotFound desc = nope") }, -1);
  assert.deepEqual(log.lines, [{
    v: 5,
    msg: "GRPC error",
    fields: {
      method: "/csi.v1.Controller/ControllerPublishVolume",
      err: "rpc error: code = NotFound desc = nope",
    },
  }]);
});
