import assert from "node:assert/strict";
import { ApiError } from "../api.ts";
import { errorFromResponse, statusMessage, statusReason } from "./status_errors.ts";
import { decodeWatchEvent } from "./watch_stream.ts";
import { requestUrl, serverUrl } from "./request_url.ts";

const CTX = {
  method: "GET",
  url: requestUrl(serverUrl(new URL("https://k")), "/apis/storage.k8s.io/v1/volumeattachments"),
};

Deno.test("a Status' message and reason are quoted safe: controls escaped, UTF-8 kept, bounded", () => {
  const body = JSON.stringify({
    kind: "Status",
    reason: "Bad\u0000Reason",
    message: 'volumeattachments "va-1" ist ungültig:\u001b[2J\nforged line',
  });
  const err = errorFromResponse(422, body);
  assert.equal(err.reason, "Bad\\x00Reason");
  assert.equal(err.message, 'volumeattachments "va-1" ist ungültig:\\x1b[2J\\x0aforged line');
  const long = errorFromResponse(
    500,
    JSON.stringify({ kind: "Status", message: "m".repeat(5000) }),
  );
  assert.equal(long.message, `${"m".repeat(4096)} …[904 more characters]`);
  // Not a string: the reason for the code, as when absent.
  assert.equal(
    errorFromResponse(409, '{"kind":"Status","reason":7,"message":[]}').reason,
    "Conflict",
  );
  // The watch ERROR event's Status (informer.ts) goes through the same two functions.
  assert.equal(statusMessage({ message: "gone\u2028away" } as never), "gone\\u2028away");
  assert.equal(statusReason({ reason: "" } as never), undefined);
});

Deno.test("a non-Status error body and a bad watch event line are quoted safe", () => {
  const err = errorFromResponse(502, "<html>\u0000bad\u0007gateway</html>");
  assert.equal(
    err.message,
    "the server responded with HTTP 502: <html>\\x00bad\\x07gateway</html>",
  );
  assert.throws(
    () => decodeWatchEvent("{\u0000\u001b]0;title\u0007", CTX),
    (e: unknown) =>
      e instanceof ApiError &&
      e.message.includes("invalid watch event: {\\x00\\x1b]0;title\\x07") &&
      ![...e.message].some((c) => c < " "),
  );
  assert.throws(
    () => decodeWatchEvent('{"type":"BAD\\u0000TYPE","object":{}}', CTX),
    (e: unknown) =>
      e instanceof ApiError && e.message.endsWith("invalid watch event type: BAD\\x00TYPE"),
  );
});

Deno.test("an error answer's ApiError carries no stack frames, and the stack limit is kept", () => {
  const limit = Error.stackTraceLimit;
  const err = errorFromResponse(404, '{"kind":"Status","reason":"NotFound","message":"gone"}');
  assert.ok(err instanceof ApiError);
  assert.equal(err.code, 404);
  assert.doesNotMatch(err.stack ?? "", /\n\s+at /);
  assert.doesNotMatch(errorFromResponse(500, "<html>oops</html>").stack ?? "", /\n\s+at /);
  assert.equal(Error.stackTraceLimit, limit);
  assert.match(new Error("other").stack ?? "", /\n\s+at /);
});
