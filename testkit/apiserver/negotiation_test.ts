import assert from "node:assert/strict";
import { negotiateOutput, parseAccept, routerAcceptError } from "./negotiation.ts";
import { StatusError } from "./status_errors.ts";

const PB = "application/vnd.kubernetes.protobuf";

function chosen(accept: string, stream = false, protobuf = true): string {
  try {
    return negotiateOutput(accept, stream, protobuf).mediaType;
  } catch (err) {
    if (err instanceof StatusError) return `${err.status.code} ${err.status.message}`;
    throw err;
  }
}

Deno.test("parseAccept() orders clauses as goautoneg's insertion sort with its Less", () => {
  // Less is not a strict order (a concrete subtype "wins" over a higher q of a wildcard one), so
  // application/json;q=0.9 ends before text/*: the order Go's sort.Sort gives for short inputs.
  const order = parseAccept("*/*;q=0.8, text/*, application/json;q=0.9, application/yaml;v=x")
    .map((c) => `${c.type}/${c.subType} ${c.q.toFixed(1)}`);
  assert.deepEqual(order, [
    "application/yaml 1.0",
    "application/json 0.9",
    "text/* 1.0",
    "*/* 0.8",
  ]);
  // A clause without a subtype (other than *) or with two slashes is dropped; a bad q is 0.
  assert.deepEqual(parseAccept("json, a/b/c, x/y;q=abc").map((c) => [c.type, c.q]), [["x", 0]]);
});

Deno.test("negotiateOutput() chooses as kube-apiserver's NegotiateMediaTypeOptions", () => {
  assert.equal(chosen(""), "application/json");
  assert.equal(chosen("*/*"), "application/json");
  assert.equal(chosen("application/*"), "application/json");
  // client-go with ContentType protobuf (the Go csi-attacher).
  assert.equal(chosen(`${PB}, */*`), PB);
  assert.equal(chosen(`${PB},application/json`), PB);
  assert.equal(chosen(`application/json;q=0.5, ${PB}`), PB);
  assert.equal(chosen(`${PB};q=0.1, application/json;q=0.9`), "application/json");
  // The first acceptable clause in the header wins at equal q.
  assert.equal(chosen(`application/json, ${PB}`), "application/json");
  assert.equal(chosen("application/yaml"), "application/yaml");
  // q=0 does not exclude a type in goautoneg.
  assert.equal(chosen(`${PB};q=0`), PB);
  // Conversions (kubectl's Table) are not served: the next clause is taken.
  assert.equal(
    chosen("application/json;as=Table;v=v1;g=meta.k8s.io, application/json"),
    "application/json",
  );
  assert.equal(chosen(`${PB};stream=watch`), PB);
  assert.equal(
    chosen(`${PB};stream=other`),
    "406 only the following media types are accepted: application/json, application/yaml, " + PB,
  );
  assert.equal(
    chosen("text/html"),
    "406 only the following media types are accepted: application/json, application/yaml, " + PB,
  );
});

Deno.test("negotiateOutput() needs a stream form for a watch, and protobuf only when served", () => {
  assert.equal(chosen(`${PB};stream=watch, application/json`, true), PB);
  assert.equal(chosen("application/json", true), "application/json");
  assert.equal(
    chosen("application/yaml", true),
    "406 only the following media types are accepted: application/json;stream=watch, " +
      `${PB};stream=watch`,
  );
  assert.equal(chosen(`${PB}, application/json`, false, false), "application/json");
  assert.equal(
    chosen(PB, false, false),
    "406 only the following media types are accepted: application/json, application/yaml",
  );
});

Deno.test("routerAcceptError() passes a clause naming a produced type, as go-restful", () => {
  assert.equal(routerAcceptError("text/html, */*", false, true), undefined);
  assert.equal(routerAcceptError(`${PB};stream=other`, false, true), undefined);
  assert.equal(routerAcceptError("", false, true), undefined);
  assert.equal(
    routerAcceptError("application/*", false, true)?.status.message,
    `406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, ${PB}`,
  );
  assert.deepEqual(routerAcceptError("text/html", true, false)?.status.details, {});
  assert.equal(
    routerAcceptError("text/html", true, false)?.status.message,
    "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, " +
      "application/json;stream=watch",
  );
});
