import assert from "node:assert/strict";
import {
  acceptsPlainText,
  flagzText,
  maskUserInfo,
  statuszText,
  unixDate,
  uptimeText,
  ZPAGES_WARNING,
} from "./zpages.ts";

Deno.test("unixDate() writes Go's time.UnixDate in UTC, the day padded with a space", () => {
  assert.equal(unixDate(Date.UTC(2024, 9, 16, 21, 3, 43)), "Wed Oct 16 21:03:43 UTC 2024");
  assert.equal(unixDate(Date.UTC(2026, 10, 2, 4, 5, 6, 999)), "Mon Nov  2 04:05:06 UTC 2026");
});

Deno.test("uptimeText() writes hours, minutes and seconds as component-base does", () => {
  assert.equal(uptimeText(16_999), "0 hr 00 min 16 sec");
  assert.equal(uptimeText(3_723_000), "1 hr 02 min 03 sec");
  assert.equal(uptimeText(50 * 3_600_000), "50 hr 00 min 00 sec");
  assert.equal(uptimeText(-5), "0 hr 00 min 00 sec");
});

Deno.test("statuszText() has the header, the warning, the times, the versions and sorted paths", () => {
  const text = statuszText({
    component: "csi-attacher",
    startTimeMs: Date.UTC(2026, 10, 28, 5, 0, 0),
    uptimeMs: 75_500,
    binaryVersion: "v0.1.0",
    runtimeVersion: "deno 2.9.6",
    paths: ["/metrics", "/statusz", "/flagz", "/healthz"],
  });
  assert.equal(
    text,
    "\ncsi-attacher statusz\n" + ZPAGES_WARNING + "\n\n" +
      "Started: Sat Nov 28 05:00:00 UTC 2026\n" +
      "Up: 0 hr 01 min 15 sec\n" +
      "Runtime version: deno 2.9.6\n" +
      "Binary version: v0.1.0\n" +
      "Paths: /flagz /healthz /metrics /statusz\n",
  );
  assert.match(ZPAGES_WARNING, /not meant to be machine parseable/);
});

Deno.test("flagzText() lists every flag as name=value, sorted, credentials in URLs masked", () => {
  assert.equal(
    flagzText("csi-attacher", [
      { name: "timeout", value: "15s" },
      { name: "csi-address", value: "dns://admin:s3cret@driver.example:50051" },
      { name: "kubeconfig", value: "" },
    ]),
    "\ncsi-attacher flags\n" + ZPAGES_WARNING + "\n\n" +
      "csi-address=dns://CLASSIFIED@driver.example:50051\n" +
      "kubeconfig=\n" +
      "timeout=15s\n",
  );
  assert.equal(maskUserInfo("/run/csi/socket"), "/run/csi/socket");
  assert.equal(maskUserInfo("user@host"), "user@host", "no scheme: not a URL");
});

Deno.test("acceptsPlainText() follows component-base's AcceptableMediaType", () => {
  for (
    const accept of [
      null,
      "",
      "*/*",
      "text/plain",
      "text/*",
      "text/plain; charset=utf-8",
      "application/json, text/plain;q=0.5",
    ]
  ) assert.ok(acceptsPlainText(accept), String(accept));
  for (
    const accept of [
      "application/json",
      "text/html",
      "text/plain; charset=latin1",
      "application/json;v=v1alpha1;g=config.k8s.io;as=Statusz",
    ]
  ) assert.ok(!acceptsPlainText(accept), accept);
});
