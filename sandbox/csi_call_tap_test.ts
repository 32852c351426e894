import assert from "node:assert/strict";
import { createLogger } from "../lib/observe/log.ts";
import { createCsiCallTap, type CsiCallEvent } from "./csi_call_tap.ts";

function setup(verbosity: number) {
  const lines: string[] = [];
  const events: CsiCallEvent[] = [];
  const forward = createLogger({ verbosity, format: "json", write: (l) => lines.push(l) });
  const log = createCsiCallTap(forward, (e) => events.push(e));
  return { lines, events, log };
}

Deno.test("createCsiCallTap() turns the gRPC log lines into call events", () => {
  const { events, log } = setup(0);
  const child = log.with({ driver: "x" });
  assert.equal(child.enabled(5), true);
  child.v(5).info("GRPC call", {
    method: "/csi.v1.Controller/ControllerPublishVolume",
    request: '{"volumeId":"v1","secrets":"***stripped***"}',
  });
  child.v(5).info("GRPC response", {
    method: "/csi.v1.Controller/ControllerPublishVolume",
    response: '{"publishContext":{}}',
  });
  child.v(5).info("GRPC error", { method: "/csi.v1.Identity/Probe", err: "rpc error: boom" });
  child.v(5).info("GRPC response", {
    method: "/csi.v1.Identity/Probe",
    response: '{"x":1} [response body too large, log capped to 7 chars]',
  });
  child.v(5).info("Something else", { method: "/csi.v1.Identity/Probe" });
  child.v(4).info("GRPC call", { method: "/csi.v1.Identity/Probe", request: "{}" });
  assert.deepEqual(events, [
    {
      kind: "call",
      method: "ControllerPublishVolume",
      request: { volumeId: "v1", secrets: "***stripped***" },
    },
    { kind: "response", method: "ControllerPublishVolume", response: { publishContext: {} } },
    { kind: "error", method: "Probe", error: "rpc error: boom" },
    {
      kind: "response",
      method: "Probe",
      response: { text: '{"x":1} [response body too large, log capped to 7 chars]' },
    },
  ]);
});

Deno.test("createCsiCallTap() forwards lines according to the forward logger's verbosity", () => {
  const quiet = setup(0);
  quiet.log.v(5).info("GRPC call", { method: "/csi.v1.Identity/Probe", request: "{}" });
  quiet.log.info("Attached", { node: "n1" });
  quiet.log.error(new Error("boom"), "Failed");
  assert.equal(quiet.lines.length, 2);
  assert.match(quiet.lines[0]!, /"msg":"Attached"/);
  assert.match(quiet.lines[1]!, /"err":"boom"/);
  assert.equal(quiet.log.enabled(6), false);

  const verbose = setup(5);
  verbose.log.with({ a: 1 }).v(5).info("GRPC call", {
    method: "/csi.v1.Identity/Probe",
    request: "{}",
  });
  assert.equal(verbose.lines.length, 1);
  assert.match(verbose.lines[0]!, /"msg":"GRPC call".*"a":1/);
  assert.equal(verbose.events.length, 1);
});
