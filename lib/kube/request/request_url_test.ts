import assert from "node:assert/strict";
import { formEncode, requestUrl, serverUrl } from "./request_url.ts";

/** The URL as the client built it before: a `URL` with its pathname and search set. */
function viaUrl(server: string, path: string, query: Record<string, string>): URL {
  const url = new URL(server);
  url.pathname = url.pathname.replace(/\/+$/, "") + path;
  url.search = new URLSearchParams(query).toString();
  return url;
}

const SERVERS = [
  "https://10.96.0.1",
  "https://10.96.0.1:443",
  "http://127.0.0.1:8080/",
  "https://api.example.com:6443/k8s/clusters/c-1/",
  "https://[fd00::1]:6443",
  "HTTPS://API.Example.COM",
];

const PATHS = [
  "/api/v1/persistentvolumes",
  "/apis/storage.k8s.io/v1/volumeattachments/" + encodeURIComponent("va-1") + "/status",
  "/api/v1/namespaces/" + encodeURIComponent("ns") + "/secrets/" + encodeURIComponent("s:1 ü"),
];

const QUERIES: Record<string, string>[] = [
  {},
  { watch: "true", resourceVersion: "12345", timeoutSeconds: "421", allowWatchBookmarks: "true" },
  { limit: "500", continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ==+/" },
  { labelSelector: "a in (x, y),!b", fieldSelector: "spec.nodeName=n~1 *'!" },
  { "odd name": "ü€𝄞\u0000&=?#%" },
];

Deno.test("requestUrl builds the URL a parsed URL with pathname and search set has", () => {
  for (const server of SERVERS) {
    const shared = serverUrl(new URL(server));
    for (const path of PATHS) {
      for (const query of QUERIES) {
        const want = viaUrl(server, path, query);
        const got = requestUrl(shared, path, query);
        assert.deepEqual(
          {
            href: got.href,
            protocol: got.protocol,
            host: got.host,
            hostname: got.hostname,
            port: got.port,
            pathname: got.pathname,
            search: got.search,
          },
          {
            href: want.href,
            protocol: want.protocol,
            host: want.host,
            hostname: want.hostname,
            port: want.port,
            pathname: want.pathname,
            search: want.search,
          },
          `${server} ${path} ${JSON.stringify(query)}`,
        );
      }
    }
  }
});

Deno.test("formEncode encodes as URLSearchParams does, byte for byte", () => {
  let all = "";
  for (let c = 0; c < 0x300; c++) all += String.fromCharCode(c);
  all += "😀\u{10FFFF}\uD800x\uDC00";
  assert.equal(`x=${formEncode(all)}`, new URLSearchParams({ x: all }).toString());
});

Deno.test("requestUrl leaves the server URL's user name and password out", () => {
  const got = requestUrl(serverUrl(new URL("https://user:pw@h:6443/")), "/api/v1/nodes");
  assert.equal(got.href, "https://h:6443/api/v1/nodes");
});
