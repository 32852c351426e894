/**
 * Where the API server connection comes from: an explicit kubeconfig file (`--kubeconfig`), the
 * in-cluster service account, or the usual default locations. The result is a
 * {@link ClusterConnection}: the server URL, the TLS material, and a provider of the credential
 * headers of each request, which {@link import("./client.ts").KubeClient} uses.
 *
 * Kubeconfig files are read here, following client-go's `tools/clientcmd` rules (`loader.go`:
 * the first file of a list to set a name or `current-context` wins, missing list entries are
 * skipped, relative paths resolve against the file that names them; `validation.go`: one
 * authentication method per user, a client certificate needs its key, no CA with
 * `insecure-skip-tls-verify`). Client certificates, tokens, token files, basic auth,
 * impersonation, CA data and files are handled here; only `exec` and `auth-provider` users load
 * `@kubernetes/client-node` (`./client_node_auth.ts`, the credential plugins), with a dynamic
 * `import()`, since that package costs tens of MiB when imported.
 *
 * Token files (the service account's projected token, a kubeconfig `tokenFile`) are re-read once
 * a minute, as client-go's `transport/token_source.go` `NewCachedFileTokenSource` does; when a
 * re-read fails, the failure is logged and the last token is kept.
 *
 * Errors are {@link KubeconfigError}s with one line naming the file and the field; they never
 * contain a token, key or password.
 *
 * Nothing here reads the environment: `main.ts` passes the values it read. Paths are POSIX paths
 * (the attacher runs on Linux); no `node:` module is loaded at start.
 *
 * @module
 */

import type { Logger } from "../observe/logger.ts";
import { dirname, isAbsolute, join, resolve } from "./posix_path.ts";
import type { TlsMaterial } from "../wire/http1/api.ts";
import { errorText } from "../errors.ts";
import { type Clock, realClock } from "../clock.ts";

export type { TlsMaterial } from "../wire/http1/api.ts";

/** Where the service account files are mounted in a pod. */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** How long a token read from a file is used before the file is read again (client-go: 1 min). */
export const TOKEN_FILE_PERIOD_MS = 60_000;

/** After a failed re-read of a token file, how long the last token is used before trying again. */
export const TOKEN_FILE_RETRY_MS = 10_000;

/** Request headers carrying credentials; a list is sent as repeated headers. */
export type CredentialHeaders = Record<string, string | string[]>;

/** How to reach and authenticate to the API server. */
export interface ClusterConnection {
  /** The API server URL (`https://host:port` or `http://…`, maybe with a path prefix). */
  readonly server: string;
  /** TLS settings; the files they came from were read when the connection was loaded. */
  readonly tls: TlsMaterial;
  /**
   * The credential headers for the next request (`Authorization`, `Impersonate-*`); current:
   * a rotated token file or a refreshed plugin token shows here. May be called concurrently.
   */
  headers(): Promise<CredentialHeaders>;
  /**
   * The cluster's `proxy-url` (an `http:` proxy, reached with `CONNECT`); when unset, the proxy
   * comes from the environment (`./request/transport.ts`).
   */
  proxyUrl?: URL;
}

/** A configuration that cannot be used; the message is one line naming the file and field. */
export class KubeconfigError extends Error {
  /** Makes the error; `message` names the file and field, never a secret. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "KubeconfigError";
  }
}

/** The in-cluster API server address, from `KUBERNETES_SERVICE_HOST` / `_PORT`. */
export interface InClusterEnv {
  host: string;
  port: string;
  /** Directory with `ca.crt`, `token` and `namespace`; default {@link SERVICE_ACCOUNT_DIR}. */
  serviceAccountDir?: string;
}

/** Inputs of {@link loadConnection}. */
export interface LoadConnectionOptions {
  /** `--kubeconfig`: when set, only this file is used. */
  kubeconfigPath?: string;
  /** Set when `KUBERNETES_SERVICE_HOST` is set: in-cluster configuration. */
  inCluster?: InClusterEnv;
  /** `KUBECONFIG` (a path list), for the default loading. */
  kubeconfigEnv?: string;
  /** `HOME`, for the default loading (`$HOME/.kube/config`). */
  home?: string;
}

/** Collaborators of {@link loadConnection}. */
export interface LoadConnectionDeps {
  /** Where a failed token re-read is reported; default: nowhere. */
  log?: Logger;
  /** Times the token file period (its monotonic reading only). @default realClock */
  clock?: Pick<Clock, "now">;
}

/**
 * Loads the connection, in the order client-go's callers use:
 * 1. `kubeconfigPath` set → that file only;
 * 2. `inCluster` set → the service account token (re-read every minute) and CA, server
 *    `https://host:port`, as client-go's `rest/config.go` `InClusterConfig`;
 * 3. otherwise the files of `kubeconfigEnv` (merged, the first to set a name wins; missing files
 *    are skipped) or `home/.kube/config`.
 *
 * Every file the configuration names (CA, client certificate and key, token file) is read here,
 * so a bad one fails at start.
 *
 * @throws {KubeconfigError} when no configuration is found or it cannot be used.
 */
export async function loadConnection(
  options: LoadConnectionOptions,
  deps: LoadConnectionDeps = {},
): Promise<ClusterConnection> {
  if (options.kubeconfigPath !== undefined && options.kubeconfigPath !== "") {
    const file = options.kubeconfigPath;
    const text = await readText(file, `kubeconfig ${file}`);
    return await connectionFromKubeconfigs([{ file, text }], deps);
  }
  if (options.inCluster !== undefined && options.inCluster.host !== "") {
    return await inClusterConnection(options.inCluster, deps);
  }
  const listed = (options.kubeconfigEnv ?? "").split(PATH_LIST_DELIMITER).filter((f) => f !== "");
  const files = listed.length > 0
    ? listed
    : options.home !== undefined && options.home !== ""
    ? [join(options.home, ".kube", "config")]
    : [];
  const sources: KubeconfigSource[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await Deno.readTextFile(file);
    } catch (err) {
      // client-go's loader skips the missing files of a list.
      if (err instanceof Deno.errors.NotFound) continue;
      throw new KubeconfigError(`kubeconfig ${file}: cannot read: ${reasonOf(err)}`);
    }
    sources.push({ file, text });
  }
  if (sources.length === 0) {
    throw new KubeconfigError(
      "no Kubernetes configuration: not running in a cluster (KUBERNETES_SERVICE_HOST is " +
        "not set), no --kubeconfig, no KUBECONFIG and no ~/.kube/config",
    );
  }
  return await connectionFromKubeconfigs(sources, deps);
}

/** The text of one kubeconfig and where it came from (relative paths resolve against it). */
export interface KubeconfigSource {
  /** The file's path; its folder is the base of relative paths. */
  file: string;
  /** The YAML (or JSON) text. */
  text: string;
}

/**
 * The connection of the current context of one or more kubeconfigs, merged as client-go merges
 * the `KUBECONFIG` list (the first to set a name or `current-context` wins).
 *
 * @throws {KubeconfigError} naming the file and field of the first problem.
 */
export async function connectionFromKubeconfigs(
  sources: KubeconfigSource[],
  deps: LoadConnectionDeps = {},
): Promise<ClusterConnection> {
  const { default: yaml } = await import("js-yaml");
  const clusters = new Map<string, Entry>();
  const users = new Map<string, Entry>();
  const contexts = new Map<string, Entry>();
  let current: { name: string; file: string } | undefined;
  for (const { file, text } of sources) {
    let doc: unknown;
    try {
      doc = yaml.load(text);
    } catch (err) {
      // js-yaml's message quotes the lines around the error, which may hold a secret: only the
      // reason and position are kept.
      const e = err as { reason?: unknown; mark?: { line?: number; column?: number } };
      const where = e.mark?.line !== undefined
        ? ` at line ${e.mark.line + 1}, column ${(e.mark.column ?? 0) + 1}`
        : "";
      const reason = typeof e.reason === "string" ? e.reason : "invalid YAML";
      throw new KubeconfigError(`kubeconfig ${file}: cannot parse${where}: ${reason}`);
    }
    if (doc === undefined || doc === null) continue; // an empty file is an empty config
    if (!isRecord(doc)) throw new KubeconfigError(`kubeconfig ${file}: not a mapping`);
    collect(file, doc, "clusters", "cluster", clusters);
    collect(file, doc, "users", "user", users);
    collect(file, doc, "contexts", "context", contexts);
    const cc = doc["current-context"];
    if (cc !== undefined && cc !== null && typeof cc !== "string") {
      throw new KubeconfigError(`kubeconfig ${file}: current-context is not a string`);
    }
    if (current === undefined && typeof cc === "string" && cc !== "") current = { name: cc, file };
  }
  const files = sources.map((s) => s.file).join(PATH_LIST_DELIMITER);
  if (current === undefined) {
    throw new KubeconfigError(`kubeconfig ${files}: current-context is not set`);
  }
  const context = contexts.get(current.name);
  if (context === undefined) {
    throw new KubeconfigError(
      `kubeconfig ${current.file}: current-context "${current.name}": no context of that name`,
    );
  }
  const clusterName = optionalString(context, "cluster") ?? "";
  const cluster = clusters.get(clusterName);
  if (cluster === undefined) {
    throw new KubeconfigError(
      `kubeconfig ${context.file}: ${context.where}.cluster "${clusterName}": no cluster of ` +
        "that name",
    );
  }
  const userName = optionalString(context, "user") ?? "";
  const user = userName === "" ? undefined : users.get(userName);
  if (userName !== "" && user === undefined) {
    throw new KubeconfigError(
      `kubeconfig ${context.file}: ${context.where}.user "${userName}": no user of that name`,
    );
  }
  return await buildConnection(cluster, user, deps);
}

/** One named cluster, user or context, with where it was found. */
interface Entry {
  /** The file it came from. */
  file: string;
  /** `clusters[0] "name"`-style position, for error messages. */
  where: string;
  /** Its `cluster` / `user` / `context` mapping. */
  value: Record<string, unknown>;
}

/** Adds the named entries of one file's list to `into`; names already there are kept. */
function collect(
  file: string,
  doc: Record<string, unknown>,
  list: "clusters" | "users" | "contexts",
  field: "cluster" | "user" | "context",
  into: Map<string, Entry>,
): void {
  const items = doc[list];
  if (items === undefined || items === null) return;
  if (!Array.isArray(items)) throw new KubeconfigError(`kubeconfig ${file}: ${list} is not a list`);
  const seen = new Set<string>();
  items.forEach((item: unknown, i) => {
    const at = `${list}[${i}]`;
    if (!isRecord(item) || typeof item.name !== "string" || item.name === "") {
      throw new KubeconfigError(`kubeconfig ${file}: ${at}: no name`);
    }
    const where = `${at} "${item.name}"`;
    if (seen.has(item.name)) {
      throw new KubeconfigError(`kubeconfig ${file}: ${where}: the name is used twice`);
    }
    seen.add(item.name);
    const value = item[field] ?? {};
    if (!isRecord(value)) {
      throw new KubeconfigError(`kubeconfig ${file}: ${where}: ${field} is not a mapping`);
    }
    if (!into.has(item.name)) into.set(item.name, { file, where: `${where} ${field}`, value });
  });
}

/** The connection for one cluster and user (`user` undefined: anonymous). */
async function buildConnection(
  cluster: Entry,
  user: Entry | undefined,
  deps: LoadConnectionDeps,
): Promise<ClusterConnection> {
  const insecure = optionalBoolean(cluster, "insecure-skip-tls-verify") ?? false;
  const ca = await pem(cluster, "certificate-authority-data", "certificate-authority");
  if (insecure && ca !== undefined) {
    // client-go's transport/transport.go refuses the same combination.
    throw new KubeconfigError(
      `kubeconfig ${cluster.file}: ${cluster.where}: specifying a root certificates file with ` +
        "insecure-skip-tls-verify is not allowed",
    );
  }
  const cert = user && await pem(user, "client-certificate-data", "client-certificate");
  const key = user && await pem(user, "client-key-data", "client-key");
  if (user !== undefined && (cert === undefined) !== (key === undefined)) {
    const missing = cert === undefined ? "client-certificate" : "client-key";
    throw new KubeconfigError(
      `kubeconfig ${user.file}: ${user.where}: ${missing}(-data) is missing: a client ` +
        "certificate needs both the certificate and its key",
    );
  }
  const serverName = optionalString(cluster, "tls-server-name");
  const rawServer = optionalString(cluster, "server") ?? "";
  if (rawServer === "") {
    throw new KubeconfigError(`kubeconfig ${cluster.file}: ${cluster.where}.server is not set`);
  }
  // client-go's DefaultServerURL: a bare host:port gets https when TLS is configured.
  const tlsConfigured = ca !== undefined || cert !== undefined || insecure;
  const server = rawServer.includes("://")
    ? rawServer
    : `${tlsConfigured ? "https" : "http"}://${rawServer}`;
  checkServer(server, `kubeconfig ${cluster.file}: ${cluster.where}.server`);
  const tls: TlsMaterial = {
    insecureSkipTlsVerify: insecure,
    ...(ca && { ca }),
    ...(cert && { cert }),
    ...(key && { key }),
    ...(serverName && { serverName }),
  };
  const headers = user === undefined ? () => Promise.resolve({}) : await credentials(user, deps);
  const proxyUrl = optionalString(cluster, "proxy-url");
  if (proxyUrl === undefined || proxyUrl === "") return { server, tls, headers };
  checkServer(proxyUrl, `kubeconfig ${cluster.file}: ${cluster.where}.proxy-url`, true);
  return { server, tls, headers, proxyUrl: new URL(proxyUrl) };
}

/** The credential header provider of one user. */
async function credentials(
  user: Entry,
  deps: LoadConnectionDeps,
): Promise<() => Promise<CredentialHeaders>> {
  const u = user.value;
  const at = `kubeconfig ${user.file}: ${user.where}`;
  const token = optionalString(user, "token");
  const tokenFile = resolvePath(user, optionalString(user, "tokenFile"));
  const username = optionalString(user, "username");
  const password = optionalString(user, "password");
  const methods = [
    ...((token || tokenFile) ? ["token"] : []),
    ...((username || password) ? ["basic auth"] : []),
    ...(u.exec !== undefined && u.exec !== null ? ["exec"] : []),
    ...(u["auth-provider"] !== undefined && u["auth-provider"] !== null ? ["auth-provider"] : []),
  ];
  if (methods.length > 1) {
    throw new KubeconfigError(
      `${at}: more than one authentication method (${methods.join(", ")}); only one is allowed`,
    );
  }
  const fixed = impersonation(user);
  let auth: () => Promise<CredentialHeaders>;
  if (tokenFile !== undefined && tokenFile !== "") {
    const source = await FileTokenSource.open(tokenFile, `${at}.tokenFile`, deps);
    auth = async () => ({ Authorization: `Bearer ${await source.token()}` });
  } else if (token !== undefined && token !== "") {
    const value = { Authorization: `Bearer ${token}` };
    auth = () => Promise.resolve(value);
  } else if (username || password) {
    const basic = base64Utf8(`${username ?? ""}:${password ?? ""}`);
    const value = { Authorization: `Basic ${basic}` };
    auth = () => Promise.resolve(value);
  } else if (methods.length === 1) {
    auth = await clientNodeCredentials(user, methods[0] as "exec" | "auth-provider");
  } else {
    auth = () => Promise.resolve({});
  }
  if (Object.keys(fixed).length === 0) return auth;
  return async () => ({ ...(await auth()), ...fixed });
}

/** `as`, `as-uid`, `as-groups` and `as-user-extra` as `Impersonate-*` headers. */
function impersonation(user: Entry): CredentialHeaders {
  const at = `kubeconfig ${user.file}: ${user.where}`;
  const headers: CredentialHeaders = {};
  const as = optionalString(user, "as");
  if (as) headers["Impersonate-User"] = as;
  const uid = optionalString(user, "as-uid");
  if (uid) headers["Impersonate-Uid"] = uid;
  const groups = user.value["as-groups"];
  if (groups !== undefined && groups !== null) {
    if (!Array.isArray(groups) || !groups.every((g) => typeof g === "string")) {
      throw new KubeconfigError(`${at}.as-groups is not a list of strings`);
    }
    if (groups.length > 0) headers["Impersonate-Group"] = groups;
  }
  const extra = user.value["as-user-extra"];
  if (extra !== undefined && extra !== null) {
    if (!isRecord(extra)) throw new KubeconfigError(`${at}.as-user-extra is not a mapping`);
    for (const [k, v] of Object.entries(extra)) {
      if (!Array.isArray(v) || !v.every((s) => typeof s === "string")) {
        throw new KubeconfigError(`${at}.as-user-extra.${k} is not a list of strings`);
      }
      headers[`Impersonate-Extra-${encodeURIComponent(k)}`] = v;
    }
  }
  return headers;
}

/**
 * A token read from a file and re-read after {@link TOKEN_FILE_PERIOD_MS}, as client-go's
 * `transport/token_source.go` (`NewCachedFileTokenSource`, `cachingTokenSource`) does. A failed
 * re-read (the file vanished, or is empty) is logged and the last token kept; it is tried again
 * after {@link TOKEN_FILE_RETRY_MS}.
 */
export class FileTokenSource {
  readonly #file: string;
  readonly #field: string;
  readonly #log: Logger | undefined;
  readonly #now: () => number;
  #token: string;
  #nextRead: number;
  #reading: Promise<string> | undefined;

  private constructor(file: string, field: string, token: string, deps: LoadConnectionDeps) {
    this.#file = file;
    this.#field = field;
    this.#log = deps.log;
    const clock = deps.clock ?? realClock;
    this.#now = () => clock.now();
    this.#token = token;
    this.#nextRead = this.#now() + TOKEN_FILE_PERIOD_MS;
  }

  /**
   * Reads the token once.
   *
   * @param field where the file is named, for errors (`kubeconfig F: users[0] "u" user.tokenFile`).
   * @throws {KubeconfigError} when the file cannot be read or holds no token.
   */
  static async open(
    file: string,
    field: string,
    deps: LoadConnectionDeps = {},
  ): Promise<FileTokenSource> {
    let token: string;
    try {
      token = await readToken(file);
    } catch (err) {
      throw new KubeconfigError(`${field} ${file}: ${reasonOf(err)}`);
    }
    return new FileTokenSource(file, field, token, deps);
  }

  /** The current token: the file's content when it was last read successfully. */
  token(): Promise<string> {
    if (this.#now() < this.#nextRead) return Promise.resolve(this.#token);
    this.#reading ??= this.#reread().finally(() => this.#reading = undefined);
    return this.#reading;
  }

  async #reread(): Promise<string> {
    try {
      this.#token = await readToken(this.#file);
      this.#nextRead = this.#now() + TOKEN_FILE_PERIOD_MS;
    } catch (err) {
      this.#nextRead = this.#now() + TOKEN_FILE_RETRY_MS;
      this.#log?.error(err, "Unable to rotate token, using the last one", {
        file: this.#file,
        field: this.#field,
        reason: reasonOf(err),
      });
    }
    return this.#token;
  }
}

/** The trimmed content of a token file; an empty file is an error. */
async function readToken(file: string): Promise<string> {
  const token = (await Deno.readTextFile(file)).trim();
  if (token === "") throw new Error("the file is empty");
  return token;
}

/** client-go's `rest.InClusterConfig`, from the given values instead of the environment. */
async function inClusterConnection(
  env: InClusterEnv,
  deps: LoadConnectionDeps,
): Promise<ClusterConnection> {
  if (env.port === "") {
    throw new KubeconfigError(
      "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and " +
        "KUBERNETES_SERVICE_PORT must be defined",
    );
  }
  const dir = env.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  // Go's net.JoinHostPort, as client-go's InClusterConfig: an IPv6 address goes in brackets.
  const host = env.host.includes(":") && !env.host.startsWith("[") ? `[${env.host}]` : env.host;
  const server = `https://${host}:${env.port}`;
  checkServer(server, "in-cluster configuration: KUBERNETES_SERVICE_HOST/PORT");
  const caFile = join(dir, "ca.crt");
  const ca = await readBytes(caFile, "in-cluster configuration: CA");
  const source = await FileTokenSource.open(
    join(dir, "token"),
    "in-cluster configuration: token",
    deps,
  );
  return {
    server,
    tls: { ca, insecureSkipTlsVerify: false },
    headers: async () => ({ Authorization: `Bearer ${await source.token()}` }),
  };
}

/**
 * The PEM of a `*-data` field (base64) or of the file a path field names (relative to the
 * kubeconfig's folder); the data field wins, as in client-go.
 */
async function pem(
  entry: Entry,
  dataField: string,
  fileField: string,
): Promise<Uint8Array | undefined> {
  const data = optionalString(entry, dataField);
  const at = `kubeconfig ${entry.file}: ${entry.where}`;
  if (data !== undefined && data !== "") {
    const compact = data.replace(/\s+/g, "");
    if (compact.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact)) {
      throw new KubeconfigError(`${at}.${dataField} is not valid base64`);
    }
    return fromBase64(compact);
  }
  const file = resolvePath(entry, optionalString(entry, fileField));
  if (file === undefined || file === "") return undefined;
  return await readBytes(file, `${at}.${fileField}`);
}

/** A path field resolved against the folder of the kubeconfig that holds it. */
function resolvePath(entry: Entry, path: string | undefined): string | undefined {
  if (path === undefined || path === "" || isAbsolute(path)) return path;
  return resolve(dirname(entry.file), path);
}

/** A string field of an entry, or undefined when absent; anything else is an error. */
function optionalString(entry: Entry, field: string): string | undefined {
  const v = entry.value[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") {
    throw new KubeconfigError(`kubeconfig ${entry.file}: ${entry.where}.${field} is not a string`);
  }
  return v;
}

/** A boolean field of an entry, or undefined when absent; anything else is an error. */
function optionalBoolean(entry: Entry, field: string): boolean | undefined {
  const v = entry.value[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") {
    throw new KubeconfigError(
      `kubeconfig ${entry.file}: ${entry.where}.${field} is not a boolean`,
    );
  }
  return v;
}

/** Throws unless `url` is an http(s) URL (or, for a proxy, also socks). */
function checkServer(url: string, at: string, proxy = false): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new KubeconfigError(`${at}: "${url}" is not a valid URL`);
  }
  // The transport speaks CONNECT to an HTTP proxy only (client-go also takes https and socks5).
  const schemes = proxy ? ["http:"] : ["http:", "https:"];
  if (!schemes.includes(parsed.protocol)) {
    throw new KubeconfigError(
      `${at}: unsupported URL scheme "${parsed.protocol}"${proxy ? " (only http: proxies)" : ""}`,
    );
  }
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await Deno.readTextFile(file);
  } catch (err) {
    throw new KubeconfigError(`${what}: cannot read: ${reasonOf(err)}`);
  }
}

async function readBytes(file: string, what: string): Promise<Uint8Array> {
  try {
    return await Deno.readFile(file);
  } catch (err) {
    throw new KubeconfigError(`${what} ${file}: cannot read: ${reasonOf(err)}`);
  }
}

/** A short reason for a file error: Deno's message without the repeated path. */
function reasonOf(err: unknown): string {
  if (err instanceof Deno.errors.NotFound) return "no such file";
  if (err instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (err instanceof Deno.errors.IsADirectory) return "is a directory";
  return errorText(err).split("\n")[0]!;
}

/** The separator of the `KUBECONFIG` path list (client-go: `filepath.ListSeparator`, POSIX). */
const PATH_LIST_DELIMITER = ":";

/** Decodes checked base64 (no whitespace) to bytes. */
function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The base64 of a string's UTF-8 bytes (`btoa` alone takes only Latin-1). */
function base64Utf8(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Loads `./client_node_auth.ts`, and with it `@kubernetes/client-node`. client-node's node-fetch 2
 * loads `whatwg-url` 5 and `tr46` 0.0.3, which `require("punycode")`, a deprecated Node module:
 * the runtime's deprecation warning, which no user can act on, is silenced for the time of the
 * import only.
 */
async function importClientNodeAuth(): Promise<typeof import("./client_node_auth.ts")> {
  // node:process costs megabytes once loaded: only this rare path loads it.
  const { default: process } = await import("node:process");
  const before = process.noDeprecation;
  process.noDeprecation = true;
  try {
    return await import("./client_node_auth.ts");
  } finally {
    process.noDeprecation = before;
  }
}

/**
 * Credentials from an `exec` or `auth-provider` plugin, through client-node (loaded only here).
 * The plugin runs once now, so a failing plugin stops the start.
 */
async function clientNodeCredentials(
  user: Entry,
  kind: "exec" | "auth-provider",
): Promise<() => Promise<CredentialHeaders>> {
  const at = `kubeconfig ${user.file}: ${user.where}.${kind}`;
  const raw = user.value[kind];
  if (!isRecord(raw)) throw new KubeconfigError(`${at} is not a mapping`);
  let plugin: Record<string, unknown> = raw;
  if (kind === "exec" && typeof raw.command === "string" && raw.command.includes("/")) {
    // client-go resolves an exec command with a path separator against the kubeconfig's folder.
    plugin = { ...raw, command: resolvePath(user, raw.command) };
  }
  const { pluginCredentials } = await importClientNodeAuth();
  const headers = pluginCredentials(kind, plugin);
  try {
    await headers();
  } catch (err) {
    throw new KubeconfigError(`${at}: the plugin failed: ${reasonOf(err)}`);
  }
  return headers;
}
