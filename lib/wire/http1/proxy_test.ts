import assert from "node:assert/strict";
import { parseIp, parseProxyUrl, proxyFunc, proxySettings, redactedProxy } from "./proxy.ts";
import { isTransportError } from "./errors.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("proxySettings: upper case before lower case, an empty value is unset, REQUEST_METHOD is CGI", () => {
  assert.deepEqual(
    proxySettings(env({
      HTTPS_PROXY: "http://upper:1",
      https_proxy: "http://lower:1",
      http_proxy: "http://lower:2",
      NO_PROXY: "",
      no_proxy: "a.test",
    })),
    { httpsProxy: "http://upper:1", httpProxy: "http://lower:2", noProxy: "a.test", cgi: false },
  );
  assert.equal(proxySettings(env({ REQUEST_METHOD: "GET" })).cgi, true);
  assert.deepEqual(proxySettings(env({})), {
    httpProxy: undefined,
    httpsProxy: undefined,
    noProxy: undefined,
    cgi: false,
  });
});

Deno.test("proxyFunc: the scheme's proxy unless NO_PROXY or loopback says direct (httpproxy's table)", () => {
  const proxy = (noProxy: string, target: string) =>
    proxyFunc({ httpProxy: "http://hp:1", httpsProxy: "http://sp:2", noProxy })(new URL(target))
      ?.host;
  // Scheme: https uses HTTPS_PROXY, http HTTP_PROXY.
  assert.equal(proxy("", "https://kube.test:6443"), "sp:2");
  assert.equal(proxy("", "http://kube.test:8080"), "hp:1");
  // Loopback and localhost are never proxied, NO_PROXY or not.
  for (
    const t of ["https://localhost:6443", "https://127.0.0.1", "https://127.9.9.9", "https://[::1]"]
  ) {
    assert.equal(proxy("", t), undefined, t);
  }
  // Domains: itself and subdomains; a leading dot or "*." only subdomains; case ignored.
  assert.equal(proxy("kube.test", "https://kube.test"), undefined);
  assert.equal(proxy("kube.test", "https://api.kube.test"), undefined);
  assert.equal(proxy("KUBE.test", "https://Api.Kube.Test"), undefined);
  assert.equal(proxy(".kube.test", "https://kube.test"), "sp:2");
  assert.equal(proxy(".kube.test", "https://api.kube.test"), undefined);
  assert.equal(proxy("*.kube.test", "https://kube.test"), "sp:2");
  assert.equal(proxy("*.kube.test", "https://api.kube.test"), undefined);
  assert.equal(proxy("ube.test", "https://kube.test"), "sp:2");
  // Ports: must equal the target's, the scheme's default when it names none.
  assert.equal(proxy("kube.test:6443", "https://kube.test:6443"), undefined);
  assert.equal(proxy("kube.test:6443", "https://kube.test:443"), "sp:2");
  assert.equal(proxy("kube.test:443", "https://kube.test"), undefined);
  // Addresses and CIDRs match only a target given as an address.
  assert.equal(proxy("10.0.0.1", "https://10.0.0.1:6443"), undefined);
  assert.equal(proxy("10.0.0.1:6443", "https://10.0.0.1:6443"), undefined);
  assert.equal(proxy("10.0.0.1:443", "https://10.0.0.1:6443"), "sp:2");
  assert.equal(proxy("10.0.0.0/8", "https://10.96.0.1"), undefined);
  assert.equal(proxy("10.0.0.0/8", "https://11.0.0.1"), "sp:2");
  assert.equal(proxy("fd00::/8", "https://[fd00::1]:6443"), undefined);
  assert.equal(proxy("[fd00::1]:6443", "https://[fd00::1]:6443"), undefined);
  assert.equal(proxy("fd00::/8", "https://[fe00::1]"), "sp:2");
  assert.equal(proxy("10.0.0.0/8", "https://ten.test"), "sp:2");
  // A list, spaces trimmed, empty and malformed entries skipped; "*" is everything.
  assert.equal(proxy(" other.test , ,:80, kube.test ", "https://kube.test"), undefined);
  assert.equal(proxy("*", "https://kube.test"), undefined);
  assert.equal(proxy("*", "https://10.0.0.1"), undefined);
});

Deno.test("proxyFunc: no proxy set, a bare host:port proxy, and the CGI refusal of HTTP_PROXY", () => {
  assert.equal(proxyFunc({})(new URL("https://kube.test")), undefined);
  assert.equal(
    proxyFunc({ httpsProxy: "p.test:3128" })(new URL("https://kube.test"))?.href,
    "http://p.test:3128/",
  );
  // In a CGI process HTTP_PROXY may come from a client's "Proxy:" header: refused for http.
  const cgi = proxyFunc({ httpProxy: "http://p:1", httpsProxy: "http://p:2", cgi: true });
  assert.throws(() => cgi(new URL("http://kube.test")), (err) => isTransportError(err, "proxy"));
  assert.equal(cgi(new URL("https://kube.test"))?.port, "2");
});

Deno.test("parseProxyUrl, redactedProxy, parseIp", () => {
  assert.equal(parseProxyUrl("http://u:p@p.test:3128")?.username, "u");
  assert.equal(parseProxyUrl("p.test:3128")?.protocol, "http:");
  assert.equal(
    redactedProxy(new URL("http://u:secret@p.test:3128")),
    "http://u:xxxxx@p.test:3128/",
  );
  assert.equal(redactedProxy(new URL("http://p.test:3128")), "http://p.test:3128/");
  assert.deepEqual(parseIp("10.1.2.3"), Uint8Array.from([10, 1, 2, 3]));
  assert.deepEqual(parseIp("::ffff:10.1.2.3"), Uint8Array.from([10, 1, 2, 3]));
  assert.equal(parseIp("fd00::1")?.length, 16);
  assert.equal(parseIp("1::2::3"), undefined);
  assert.equal(parseIp("010.1.2.3"), undefined);
  assert.equal(parseIp("256.1.2.3"), undefined);
  assert.equal(parseIp("kube.test"), undefined);
});
