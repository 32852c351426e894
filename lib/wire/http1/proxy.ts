/**
 * Which proxy a request goes through, by the rules of Go's `net/http.ProxyFromEnvironment`
 * (golang.org/x/net/http/httpproxy `Config.ProxyFunc`, which client-go's transports use through
 * `k8s.io/apimachinery/pkg/util/net` `NewProxierWithNoProxyCIDR`), and the proxy URL itself.
 * The caller reads the environment; nothing here does.
 *
 * @module
 */

import { TransportError } from "./errors.ts";

/**
 * The proxy settings of an environment, as httpproxy's `FromEnvironment` reads them: each field
 * from its upper-case variable, else from its lower-case one (an empty value counts as unset).
 */
export interface ProxySettings {
  /** `HTTP_PROXY` / `http_proxy`: the proxy of `http:` requests. */
  httpProxy?: string;
  /** `HTTPS_PROXY` / `https_proxy`: the proxy of `https:` requests. */
  httpsProxy?: string;
  /** `NO_PROXY` / `no_proxy`: the hosts reached directly (see {@link proxyForUrl}). */
  noProxy?: string;
  /**
   * `REQUEST_METHOD` is set: the process runs as a CGI script, where `HTTP_PROXY` may come from
   * a client's `Proxy:` header (golang.org/s/cgihttpproxy), so a proxy for `http:` is refused.
   */
  cgi?: boolean;
}

/** The variables {@link proxySettings} reads, in the order httpproxy's `FromEnvironment` reads them. */
export const PROXY_ENVIRONMENT_VARIABLES: readonly string[] = Object.freeze([
  "HTTP_PROXY",
  "http_proxy",
  "HTTPS_PROXY",
  "https_proxy",
  "NO_PROXY",
  "no_proxy",
  "REQUEST_METHOD",
]);

/** The settings of an environment given as a lookup by variable name (httpproxy `getEnvAny`). */
export function proxySettings(lookup: (name: string) => string | undefined): ProxySettings {
  const any = (...names: string[]): string | undefined => {
    for (const name of names) {
      const value = lookup(name);
      if (value !== undefined && value !== "") return value;
    }
    return undefined;
  };
  return {
    httpProxy: any("HTTP_PROXY", "http_proxy"),
    httpsProxy: any("HTTPS_PROXY", "https_proxy"),
    noProxy: any("NO_PROXY", "no_proxy"),
    cgi: any("REQUEST_METHOD") !== undefined,
  };
}

/**
 * A proxy URL as httpproxy's `parseProxy` reads it: a value without a scheme or host
 * (`proxy:3128`) is taken as `http://` + the value. Undefined for a value that is no URL either
 * way (httpproxy then uses no proxy).
 */
export function parseProxyUrl(value: string): URL | undefined {
  const parse = (text: string): URL | undefined => {
    try {
      return new URL(text);
    } catch {
      return undefined;
    }
  };
  const url = parse(value);
  if (url !== undefined && url.host !== "") return url;
  return parse(`http://${value}`) ?? url;
}

/** The proxy URL without its password, for messages (Go's `url.URL.Redacted`). */
export function redactedProxy(proxy: URL): string {
  if (proxy.password === "") return proxy.href;
  const copy = new URL(proxy.href);
  copy.password = "xxxxx";
  return copy.href;
}

/** One entry of `NO_PROXY`; `port` "" matches every port. */
type NoProxyMatcher =
  | { kind: "all" }
  | { kind: "cidr"; network: Uint8Array; bits: number }
  | { kind: "ip"; ip: Uint8Array; port: string }
  | { kind: "domain"; suffix: string; port: string; matchHost: boolean };

/** `NO_PROXY` parsed as httpproxy's `config.init` parses it; malformed entries are skipped. */
function noProxyMatchers(noProxy: string): NoProxyMatcher[] {
  const matchers: NoProxyMatcher[] = [];
  for (const raw of noProxy.split(",")) {
    const entry = raw.trim().toLowerCase();
    if (entry === "") continue;
    if (entry === "*") return [{ kind: "all" }];
    const cidr = parseCidr(entry);
    if (cidr !== undefined) {
      matchers.push({ kind: "cidr", ...cidr });
      continue;
    }
    let [host, port] = splitHostPort(entry) ?? [entry, ""];
    if (host === "") continue;
    if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
    const ip = parseIp(host);
    if (ip !== undefined) {
      matchers.push({ kind: "ip", ip, port });
      continue;
    }
    // "*.example.com" and ".example.com" match subdomains only; "example.com" itself too.
    if (host.startsWith("*.")) host = host.slice(1);
    const matchHost = !host.startsWith(".");
    matchers.push({ kind: "domain", suffix: matchHost ? `.${host}` : host, port, matchHost });
  }
  return matchers;
}

/**
 * The proxy of each target under `settings` (httpproxy `Config.ProxyFunc`), undefined for a
 * direct connection:
 * - `https:` targets use `httpsProxy`, `http:` targets `httpProxy`; nothing else is proxied;
 * - `localhost` and loopback addresses are never proxied;
 * - `noProxy` is a comma-separated list: `*` (no proxy at all), an IP address or CIDR range
 *   (matched against a target given as an address), a domain (`example.com` matches it and its
 *   subdomains; `.example.com` and `*.example.com` only the subdomains), each optionally with a
 *   `:port` that must then equal the target's port (the scheme's default when it has none);
 *   matching ignores case.
 *
 * The returned function throws a {@link TransportError} `proxy` for an `http:` target when a
 * proxy for it is set in a CGI process ({@link ProxySettings.cgi}), as httpproxy refuses it.
 */
export function proxyFunc(settings: ProxySettings): (target: URL) => URL | undefined {
  const matchers = noProxyMatchers(settings.noProxy ?? "");
  const parsed = (value: string | undefined) =>
    value === undefined || value === "" ? undefined : parseProxyUrl(value);
  const httpsProxy = parsed(settings.httpsProxy);
  const httpProxy = parsed(settings.httpProxy);
  return (target) => {
    const proxy = target.protocol === "https:"
      ? httpsProxy
      : target.protocol === "http:"
      ? httpProxy
      : undefined;
    if (proxy === undefined) return undefined;
    if (target.protocol === "http:" && settings.cgi) {
      throw new TransportError(
        "proxy",
        "refusing to use HTTP_PROXY value in CGI environment; see golang.org/s/cgihttpproxy",
      );
    }
    return bypassed(matchers, target) ? undefined : proxy;
  };
}

/** True when `target` is reached directly: loopback, or matched by an entry of `NO_PROXY`. */
function bypassed(matchers: NoProxyMatcher[], target: URL): boolean {
  const host = target.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const port = target.port !== "" ? target.port : target.protocol === "https:" ? "443" : "80";
  if (host === "localhost") return true;
  const ip = parseIp(host);
  if (ip !== undefined && isLoopback(ip)) return true;
  return matchers.some((m) => {
    switch (m.kind) {
      case "all":
        return true;
      case "cidr":
        return ip !== undefined && inNetwork(ip, m.network, m.bits);
      case "ip":
        return ip !== undefined && sameIp(ip, m.ip) && (m.port === "" || m.port === port);
      case "domain":
        return ip === undefined &&
          (host.endsWith(m.suffix) || (m.matchHost && host === m.suffix.slice(1))) &&
          (m.port === "" || m.port === port);
    }
  });
}

/** `host:port` or `[v6]:port` split as Go's `net.SplitHostPort`; undefined without a port. */
function splitHostPort(text: string): [string, string] | undefined {
  const colon = text.lastIndexOf(":");
  if (colon < 0) return undefined;
  const host = text.slice(0, colon);
  const port = text.slice(colon + 1);
  if (host.startsWith("[")) return host.endsWith("]") ? [host, port] : undefined;
  // An unbracketed IPv6 address has more than one colon: "too many colons".
  return host.includes(":") ? undefined : [host, port];
}

/** An IP address as 4 (IPv4, also an IPv4-mapped IPv6 address) or 16 bytes; undefined if none. */
export function parseIp(text: string): Uint8Array | undefined {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return v4;
  if (!text.includes(":")) return undefined;
  // A trailing dotted IPv4 part ("::ffff:192.0.2.1") is two 16-bit groups.
  let hex = text;
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted !== null) {
    const b = parseIpv4(dotted[1]!);
    if (b === undefined) return undefined;
    const [b0, b1, b2, b3] = b as unknown as [number, number, number, number];
    hex = `${text.slice(0, dotted.index + 1)}${((b0 << 8) | b1).toString(16)}:${
      ((b2 << 8) | b3).toString(16)
    }`;
  }
  const halves = hex.split("::");
  if (halves.length > 2) return undefined;
  const groups = (s: string) => s === "" ? [] : s.split(":");
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if ([...head, ...tail].some((w) => !/^[0-9a-f]{1,4}$/i.test(w))) return undefined;
  const zeros = 8 - head.length - tail.length;
  if (halves.length === 1 ? zeros !== 0 : zeros < 1) return undefined;
  const words = [...head, ...Array<string>(halves.length === 2 ? zeros : 0).fill("0"), ...tail];
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    const n = parseInt(w, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 0xff;
  });
  const mapped = bytes.subarray(0, 12).every((b, i) => b === (i < 10 ? 0 : 0xff));
  return mapped ? bytes.slice(12) : bytes;
}

/** Dotted IPv4; like Go's parser, no leading zeros (ambiguous: octal to some) and no part over 255. */
function parseIpv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || parts.some((p) => !/^(0|[1-9]\d{0,2})$/.test(p) || Number(p) > 255)) {
    return undefined;
  }
  return Uint8Array.from(parts.map(Number));
}

/** `a.b.c.d/n` or `v6/n` as Go's `net.ParseCIDR` reads it. */
function parseCidr(text: string): { network: Uint8Array; bits: number } | undefined {
  const slash = text.indexOf("/");
  if (slash < 0 || !/^\d{1,3}$/.test(text.slice(slash + 1))) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const bits = Number(text.slice(slash + 1));
  if (ip === undefined || bits > ip.length * 8) return undefined;
  return { network: ip, bits };
}

function inNetwork(ip: Uint8Array, network: Uint8Array, bits: number): boolean {
  if (ip.length !== network.length) return false;
  for (let i = 0; i < bits; i++) {
    const mask = 0x80 >> (i % 8);
    if ((ip[i >> 3]! & mask) !== (network[i >> 3]! & mask)) return false;
  }
  return true;
}

function sameIp(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** 127.0.0.0/8 and ::1 (Go's `net.IP.IsLoopback`). */
function isLoopback(ip: Uint8Array): boolean {
  return ip.length === 4 ? ip[0] === 127 : ip.every((b, i) => b === (i === 15 ? 1 : 0));
}
