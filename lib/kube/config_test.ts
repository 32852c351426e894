import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type ClusterConnection,
  connectionFromKubeconfigs,
  FileTokenSource,
  KubeconfigError,
  loadConnection,
  TOKEN_FILE_PERIOD_MS,
  TOKEN_FILE_RETRY_MS,
} from "./config.ts";
import type { Fields, Logger } from "../observe/logger.ts";
import { KubeClient } from "./client.ts";
import { PERSISTENT_VOLUMES } from "./api.ts";
import { ConnectProxy } from "../../testkit/connect_proxy.ts";

/** A temporary directory removed when disposed. */
async function tempDir(): Promise<AsyncDisposable & { path: string }> {
  const path = await Deno.makeTempDir();
  return { path, [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }) };
}

/** A kubeconfig (as JSON, which is YAML too) with one context `name` → cluster and user `name`. */
function kubeconfig(
  name: string,
  cluster: Record<string, unknown>,
  user?: Record<string, unknown>,
  more: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster }],
    users: user === undefined ? [] : [{ name, user }],
    contexts: [{ name, context: { cluster: name, ...(user && { user: name }) } }],
    "current-context": name,
    ...more,
  });
}

/** Loads one kubeconfig text as if it were the file `file`. */
function fromText(text: string, file = "/cfg/kubeconfig"): Promise<ClusterConnection> {
  return connectionFromKubeconfigs([{ file, text }]);
}

const decoder = new TextDecoder();
const b64 = (s: string) => btoa(s);

/** A logger that records error lines. */
function recordingLogger(): Logger & { errors: [string, Fields | undefined, unknown][] } {
  const errors: [string, Fields | undefined, unknown][] = [];
  const log: Logger & { errors: typeof errors } = {
    errors,
    info() {},
    error: (err, msg, fields) => errors.push([msg, fields, err]),
    v: () => log,
    enabled: () => true,
    with: () => log,
  };
  return log;
}

Deno.test("loadConnection() with kubeconfigPath uses only that file, paths relative to its folder", async () => {
  await using dir = await tempDir();
  await Deno.mkdir(join(dir.path, "pki"));
  await Deno.writeTextFile(join(dir.path, "pki", "ca.crt"), "CA PEM");
  await Deno.writeTextFile(join(dir.path, "pki", "client.crt"), "CERT PEM");
  await Deno.writeTextFile(join(dir.path, "pki", "client.key"), "KEY PEM");
  await Deno.writeTextFile(join(dir.path, "pki", "token"), "file-token\n");
  const file = join(dir.path, "config");
  await Deno.writeTextFile(
    file,
    kubeconfig("a", { server: "https://a.example:6443", "certificate-authority": "pki/ca.crt" }, {
      "client-certificate": "pki/client.crt",
      "client-key": join(dir.path, "pki", "client.key"),
      tokenFile: "pki/token",
    }),
  );
  const c = await loadConnection({
    kubeconfigPath: file,
    inCluster: { host: "10.0.0.1", port: "443" },
    kubeconfigEnv: "/nonexistent",
  });
  assert.equal(c.server, "https://a.example:6443");
  assert.equal(decoder.decode(c.tls.ca), "CA PEM");
  assert.equal(decoder.decode(c.tls.cert), "CERT PEM");
  assert.equal(decoder.decode(c.tls.key), "KEY PEM");
  assert.equal(c.tls.insecureSkipTlsVerify, false);
  assert.deepEqual(await c.headers(), { Authorization: "Bearer file-token" });
  assert.equal(c.proxyUrl, undefined);
});

Deno.test("connectionFromKubeconfigs() decodes the *-data fields, which win over the files", async () => {
  const c = await fromText(
    kubeconfig("a", {
      server: "https://a.example",
      "certificate-authority-data": b64("CA DATA"),
      "certificate-authority": "/nonexistent/ca.crt",
      "tls-server-name": "kubernetes.default",
    }, {
      "client-certificate-data": b64("CERT DATA"),
      "client-key-data": b64("KEY DATA"),
      "client-key": "/nonexistent/key",
      token: "static-token",
    }),
  );
  assert.equal(decoder.decode(c.tls.ca), "CA DATA");
  assert.equal(decoder.decode(c.tls.cert), "CERT DATA");
  assert.equal(decoder.decode(c.tls.key), "KEY DATA");
  assert.equal(c.tls.serverName, "kubernetes.default");
  assert.deepEqual(await c.headers(), { Authorization: "Bearer static-token" });
});

Deno.test("connectionFromKubeconfigs() reads YAML with insecure-skip-tls-verify, basic auth and impersonation", async () => {
  const yaml = [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: c",
    "  cluster:",
    "    server: https://c.example:6443",
    "    insecure-skip-tls-verify: true",
    "users:",
    "- name: u",
    "  user:",
    "    username: admin",
    "    password: 'p:w'",
    "    as: bob",
    "    as-uid: '42'",
    "    as-groups: [g1, g2]",
    "    as-user-extra:",
    "      scopes: [view]",
    "contexts:",
    "- name: other",
    "  context: {cluster: nowhere, user: nobody}",
    "- name: ctx",
    "  context:",
    "    cluster: c",
    "    user: u",
    "    namespace: kube-system",
    "current-context: ctx",
    "",
  ].join("\n");
  const c = await fromText(yaml);
  assert.equal(c.server, "https://c.example:6443");
  assert.deepEqual(c.tls, { insecureSkipTlsVerify: true });
  assert.deepEqual(await c.headers(), {
    Authorization: `Basic ${b64("admin:p:w")}`,
    "Impersonate-User": "bob",
    "Impersonate-Uid": "42",
    "Impersonate-Group": ["g1", "g2"],
    "Impersonate-Extra-scopes": ["view"],
  });
});

Deno.test("connectionFromKubeconfigs() with a context without user is anonymous", async () => {
  const c = await fromText(kubeconfig("a", { server: "http://127.0.0.1:8080" }));
  assert.equal(c.server, "http://127.0.0.1:8080");
  assert.deepEqual(await c.headers(), {});
});

Deno.test("connectionFromKubeconfigs() gives a bare host:port https when TLS is configured, else http", async () => {
  const tls = await fromText(
    kubeconfig("a", { server: "a.example:6443", "insecure-skip-tls-verify": true }),
  );
  assert.equal(tls.server, "https://a.example:6443");
  const plain = await fromText(kubeconfig("a", { server: "127.0.0.1:8080" }));
  assert.equal(plain.server, "http://127.0.0.1:8080");
});

Deno.test("loadConnection() merges the KUBECONFIG files: the first to set a name or current-context wins, missing files are skipped", async () => {
  await using dir = await tempDir();
  const a = join(dir.path, "a");
  const b = join(dir.path, "b");
  // a: no current-context, its own cluster "shared"; b: current-context "ctx", a "shared" cluster
  // that loses against a's, and the context and user.
  await Deno.writeTextFile(
    a,
    JSON.stringify({ clusters: [{ name: "shared", cluster: { server: "https://from-a" } }] }),
  );
  await Deno.writeTextFile(
    b,
    JSON.stringify({
      clusters: [{ name: "shared", cluster: { server: "https://from-b" } }],
      users: [{ name: "u", user: { token: "b-token" } }],
      contexts: [{ name: "ctx", context: { cluster: "shared", user: "u" } }],
      "current-context": "ctx",
    }),
  );
  const c = await loadConnection({
    kubeconfigEnv: `${join(dir.path, "missing")}:${a}:${b}`,
    home: "/nonexistent",
  });
  assert.equal(c.server, "https://from-a");
  assert.deepEqual(await c.headers(), { Authorization: "Bearer b-token" });

  // The first current-context wins too.
  const d = join(dir.path, "d");
  await Deno.writeTextFile(
    d,
    kubeconfig("d", { server: "https://from-d" }, undefined, { "current-context": "d" }),
  );
  const first = await loadConnection({ kubeconfigEnv: `${d}:${b}` });
  assert.equal(first.server, "https://from-d");
});

Deno.test("loadConnection() precedence: --kubeconfig, then in-cluster, then KUBECONFIG, then ~/.kube/config", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(join(dir.path, "token"), "sa-token");
  await Deno.writeTextFile(join(dir.path, "ca.crt"), "SA CA");
  await Deno.mkdir(join(dir.path, ".kube"));
  await Deno.writeTextFile(
    join(dir.path, ".kube", "config"),
    kubeconfig("h", { server: "http://home:8080" }),
  );
  const env = join(dir.path, "env");
  await Deno.writeTextFile(env, kubeconfig("e", { server: "http://env:8080" }));
  const explicit = join(dir.path, "explicit");
  await Deno.writeTextFile(explicit, kubeconfig("x", { server: "http://explicit:8080" }));
  const inCluster = { host: "10.96.0.1", port: "443", serviceAccountDir: dir.path };

  const all = { kubeconfigPath: explicit, inCluster, kubeconfigEnv: env, home: dir.path };
  assert.equal((await loadConnection(all)).server, "http://explicit:8080");
  assert.equal(
    (await loadConnection({ ...all, kubeconfigPath: "" })).server,
    "https://10.96.0.1:443",
  );
  assert.equal(
    (await loadConnection({ ...all, kubeconfigPath: undefined, inCluster: undefined })).server,
    "http://env:8080",
  );
  assert.equal(
    (await loadConnection({ kubeconfigEnv: "", home: dir.path })).server,
    "http://home:8080",
  );
  // KUBECONFIG set: ~/.kube/config is not looked at, even when the listed files are missing.
  await assert.rejects(
    loadConnection({ kubeconfigEnv: join(dir.path, "missing"), home: dir.path }),
    (err: unknown) =>
      err instanceof KubeconfigError && /no Kubernetes configuration/.test(err.message),
  );
  await assert.rejects(
    loadConnection({ home: join(dir.path, "nothing") }),
    /no Kubernetes configuration/,
  );
});

Deno.test("loadConnection() in cluster uses the service account token and CA, as InClusterConfig", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(join(dir.path, "token"), "sa-token\n");
  await Deno.writeTextFile(join(dir.path, "ca.crt"), "SA CA");
  const c = await loadConnection({
    inCluster: { host: "10.96.0.1", port: "443", serviceAccountDir: dir.path },
    kubeconfigEnv: "/nonexistent",
  });
  assert.equal(c.server, "https://10.96.0.1:443");
  assert.equal(decoder.decode(c.tls.ca), "SA CA");
  assert.equal(c.tls.insecureSkipTlsVerify, false);
  assert.deepEqual(await c.headers(), { Authorization: "Bearer sa-token" });

  const v6 = await loadConnection({
    inCluster: { host: "fd00::1", port: "6443", serviceAccountDir: dir.path },
  });
  assert.equal(v6.server, "https://[fd00::1]:6443");
  const bracketed = await loadConnection({
    inCluster: { host: "[fd00::1]", port: "6443", serviceAccountDir: dir.path },
  });
  assert.equal(bracketed.server, "https://[fd00::1]:6443");
  await assert.rejects(
    loadConnection({ inCluster: { host: "10.96.0.1", port: "", serviceAccountDir: dir.path } }),
    /KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined/,
  );
});

Deno.test("loadConnection() in cluster names the missing token or CA file", async () => {
  await using dir = await tempDir();
  const inCluster = { host: "10.96.0.1", port: "443", serviceAccountDir: dir.path };
  await Deno.writeTextFile(join(dir.path, "token"), "sa-token");
  await assert.rejects(
    loadConnection({ inCluster }),
    (err: unknown) =>
      err instanceof KubeconfigError &&
      err.message === `in-cluster configuration: CA ${join(dir.path, "ca.crt")}: cannot read: ` +
          "no such file",
  );
  await Deno.writeTextFile(join(dir.path, "ca.crt"), "SA CA");
  await Deno.remove(join(dir.path, "token"));
  await assert.rejects(
    loadConnection({ inCluster }),
    (err: unknown) =>
      err instanceof KubeconfigError &&
      err.message === `in-cluster configuration: token ${join(dir.path, "token")}: no such file`,
  );
  await Deno.writeTextFile(join(dir.path, "token"), " \n");
  await assert.rejects(loadConnection({ inCluster }), /token .*: the file is empty/);
});

Deno.test("loadConnection() in cluster re-reads the rotated token after a minute", async () => {
  await using dir = await tempDir();
  await Deno.writeTextFile(join(dir.path, "token"), "token-1");
  await Deno.writeTextFile(join(dir.path, "ca.crt"), "SA CA");
  let now = 1_000;
  const c = await loadConnection(
    { inCluster: { host: "10.96.0.1", port: "443", serviceAccountDir: dir.path } },
    { clock: { now: () => now } },
  );
  await Deno.writeTextFile(join(dir.path, "token"), "token-2");
  now += TOKEN_FILE_PERIOD_MS - 1;
  assert.deepEqual(await c.headers(), { Authorization: "Bearer token-1" });
  now += 1;
  assert.deepEqual(await c.headers(), { Authorization: "Bearer token-2" });
});

Deno.test("FileTokenSource keeps the last token while the file is gone, logs it, and retries", async () => {
  await using dir = await tempDir();
  const file = join(dir.path, "token");
  await Deno.writeTextFile(file, "secret-1");
  let now = 0;
  const log = recordingLogger();
  const source = await FileTokenSource.open(file, 'kubeconfig K: users[0] "u" user.tokenFile', {
    clock: { now: () => now },
    log,
  });
  await Deno.remove(file);
  now = TOKEN_FILE_PERIOD_MS;
  // Concurrent callers share one read.
  assert.deepEqual(await Promise.all([source.token(), source.token()]), ["secret-1", "secret-1"]);
  assert.equal(log.errors.length, 1);
  const [msg, fields] = log.errors[0]!;
  assert.equal(msg, "Unable to rotate token, using the last one");
  assert.equal(fields?.file, file);
  assert.equal(fields?.reason, "no such file");
  assert.ok(!JSON.stringify(log.errors).includes("secret-1"));

  // Not retried before the retry delay; then the new token is used.
  await Deno.writeTextFile(file, "secret-2");
  now += TOKEN_FILE_RETRY_MS - 1;
  assert.equal(await source.token(), "secret-1");
  assert.equal(log.errors.length, 1);
  now += 1;
  assert.equal(await source.token(), "secret-2");

  // An empty file (a write caught half-way) keeps the last token too.
  await Deno.writeTextFile(file, "");
  now += TOKEN_FILE_PERIOD_MS;
  assert.equal(await source.token(), "secret-2");
  assert.equal(log.errors.length, 2);
});

/** Asserts a one-line KubeconfigError whose message is exactly `message` (or matches it). */
function kubeconfigError(message: string | RegExp): (err: unknown) => boolean {
  return (err: unknown) => {
    assert.ok(err instanceof KubeconfigError, `expected KubeconfigError, got ${err}`);
    assert.ok(!err.message.includes("\n"), "one line");
    if (typeof message === "string") assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  };
}

Deno.test("connectionFromKubeconfigs() rejects bad input naming the file and field", async () => {
  const F = "/cfg/kubeconfig";
  const at = `kubeconfig ${F}`;
  const cases: [string, string, string | RegExp][] = [
    ["a list at the top", "[1, 2]", `${at}: not a mapping`],
    ["no current-context", JSON.stringify({ clusters: [] }), `${at}: current-context is not set`],
    [
      "a missing context",
      JSON.stringify({ "current-context": "nope" }),
      `${at}: current-context "nope": no context of that name`,
    ],
    [
      "a missing cluster",
      JSON.stringify({
        contexts: [{ name: "x", context: { cluster: "gone" } }],
        "current-context": "x",
      }),
      `${at}: contexts[0] "x" context.cluster "gone": no cluster of that name`,
    ],
    [
      "a missing user",
      JSON.stringify({
        clusters: [{ name: "c", cluster: { server: "https://c" } }],
        contexts: [{ name: "x", context: { cluster: "c", user: "gone" } }],
        "current-context": "x",
      }),
      `${at}: contexts[0] "x" context.user "gone": no user of that name`,
    ],
    [
      "no server",
      kubeconfig("a", {}),
      `${at}: clusters[0] "a" cluster.server is not set`,
    ],
    [
      "a bad server URL",
      kubeconfig("a", { server: "https://[bad" }),
      `${at}: clusters[0] "a" cluster.server: "https://[bad" is not a valid URL`,
    ],
    [
      "a server of the wrong type",
      kubeconfig("a", { server: 6443 }),
      `${at}: clusters[0] "a" cluster.server is not a string`,
    ],
    [
      "insecure-skip-tls-verify as a string",
      kubeconfig("a", { server: "https://a", "insecure-skip-tls-verify": "yes" }),
      `${at}: clusters[0] "a" cluster.insecure-skip-tls-verify is not a boolean`,
    ],
    [
      "a missing CA file",
      kubeconfig("a", { server: "https://a", "certificate-authority": "ca.crt" }),
      `${at}: clusters[0] "a" cluster.certificate-authority /cfg/ca.crt: cannot read: no such file`,
    ],
    [
      "bad base64 CA data",
      kubeconfig("a", { server: "https://a", "certificate-authority-data": "not base64!" }),
      `${at}: clusters[0] "a" cluster.certificate-authority-data is not valid base64`,
    ],
    [
      "a CA with insecure-skip-tls-verify",
      kubeconfig("a", {
        server: "https://a",
        "certificate-authority-data": b64("CA"),
        "insecure-skip-tls-verify": true,
      }),
      `${at}: clusters[0] "a" cluster: specifying a root certificates file with ` +
      "insecure-skip-tls-verify is not allowed",
    ],
    [
      "a missing client key file",
      kubeconfig("a", { server: "https://a" }, {
        "client-certificate-data": b64("CERT"),
        "client-key": "/nonexistent/key.pem",
      }),
      `${at}: users[0] "a" user.client-key /nonexistent/key.pem: cannot read: no such file`,
    ],
    [
      "a client certificate without key",
      kubeconfig("a", { server: "https://a" }, { "client-certificate-data": b64("CERT") }),
      /^kubeconfig \/cfg\/kubeconfig: users\[0\] "a" user: client-key\(-data\) is missing/,
    ],
    [
      "a missing token file",
      kubeconfig("a", { server: "https://a" }, { tokenFile: "token" }),
      `${at}: users[0] "a" user.tokenFile /cfg/token: no such file`,
    ],
    [
      "two authentication methods",
      kubeconfig("a", { server: "https://a" }, { token: "t", username: "u", password: "p" }),
      `${at}: users[0] "a" user: more than one authentication method (token, basic auth); ` +
      "only one is allowed",
    ],
    [
      "a duplicate name",
      JSON.stringify({
        clusters: [
          { name: "c", cluster: { server: "https://1" } },
          { name: "c", cluster: { server: "https://2" } },
        ],
      }),
      `${at}: clusters[1] "c": the name is used twice`,
    ],
    [
      "an entry without name",
      JSON.stringify({ users: [{ user: { token: "t" } }] }),
      `${at}: users[0]: no name`,
    ],
    [
      "as-groups not a list",
      kubeconfig("a", { server: "https://a" }, { "as-groups": "g" }),
      `${at}: users[0] "a" user.as-groups is not a list of strings`,
    ],
  ];
  for (const [name, text, message] of cases) {
    await assert.rejects(fromText(text, F), kubeconfigError(message), name);
  }
});

Deno.test("connectionFromKubeconfigs() reports a YAML syntax error by position, never quoting the file", async () => {
  const text = "users:\n- name: u\n  user:\n    token: s3cr3t-t0ken\n  [broken\n";
  await assert.rejects(
    fromText(text),
    (err: unknown) =>
      kubeconfigError(/^kubeconfig \/cfg\/kubeconfig: cannot parse at line \d+, column \d+: /)(
        err,
      ) && !(err as Error).message.includes("s3cr3t") && (err as Error).cause === undefined,
  );
});

Deno.test("loadConnection() names the --kubeconfig file it cannot read", async () => {
  await assert.rejects(
    loadConnection({ kubeconfigPath: "/nonexistent/kubeconfig" }),
    kubeconfigError("kubeconfig /nonexistent/kubeconfig: cannot read: no such file"),
  );
});

/** A shell script plugin in `dir` that prints `output` and exits with `code`. */
async function execPlugin(dir: string, output: string, code = 0): Promise<string> {
  const path = join(dir, "plugin.sh");
  await Deno.writeTextFile(path, `#!/bin/sh\ncat <<'EOF'\n${output}\nEOF\nexit ${code}\n`);
  await Deno.chmod(path, 0o755);
  return path;
}

Deno.test("connectionFromKubeconfigs() runs an exec plugin (through client-node) for the token", async () => {
  await using dir = await tempDir();
  await execPlugin(
    dir.path,
    JSON.stringify({
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      status: { token: "exec-token" },
    }),
  );
  const exec = {
    apiVersion: "client.authentication.k8s.io/v1",
    command: "./plugin.sh",
    interactiveMode: "Never",
  };
  const c = await fromText(
    kubeconfig("a", { server: "https://a" }, { exec }),
    join(dir.path, "config"),
  );
  assert.deepEqual(await c.headers(), { Authorization: "Bearer exec-token" });
});

Deno.test("connectionFromKubeconfigs() fails at load when the exec plugin fails", async () => {
  await using dir = await tempDir();
  await execPlugin(dir.path, "no credentials here", 1);
  const exec = { apiVersion: "client.authentication.k8s.io/v1", command: "./plugin.sh" };
  const file = join(dir.path, "config");
  await assert.rejects(
    fromText(kubeconfig("a", { server: "https://a" }, { exec }), file),
    kubeconfigError(
      new RegExp(`^kubeconfig ${file}: users\\[0\\] "a" user\\.exec: the plugin failed: `),
    ),
  );
});

Deno.test("a proxy-url cluster is reached through the proxy's CONNECT tunnel", async () => {
  const seen: string[] = [];
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(`${req.url} ${req.headers.get("authorization")}`);
    return Response.json({ apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "pv1" } });
  });
  await using proxy = ConnectProxy.start({ route: () => server.addr.port });
  const connection = await fromText(
    kubeconfig("a", { server: "http://kube.invalid:6443", "proxy-url": proxy.url }, {
      token: "t0k",
    }),
  );
  assert.equal(connection.proxyUrl?.href, `${proxy.url}/`);
  await using client = new KubeClient({ connection });
  const pv = await client.get(PERSISTENT_VOLUMES, "pv1");
  assert.equal(pv.metadata.name, "pv1");
  assert.deepEqual(proxy.connects.map((c) => c.authority), ["kube.invalid:6443"]);
  assert.deepEqual(seen, ["http://kube.invalid:6443/api/v1/persistentvolumes/pv1 Bearer t0k"]);
});

Deno.test("connectionFromKubeconfigs() refuses a proxy-url that is not a proxy URL", async () => {
  await assert.rejects(
    fromText(kubeconfig("a", { server: "https://a", "proxy-url": "ftp://p:21" })),
    kubeconfigError(
      'kubeconfig /cfg/kubeconfig: clusters[0] "a" cluster.proxy-url: unsupported URL scheme "ftp:" (only http: proxies)',
    ),
  );
});

Deno.test("connectionFromKubeconfigs() sends a non-ASCII basic auth password as UTF-8 base64", async () => {
  const c = await fromText(
    kubeconfig("a", { server: "https://a" }, {
      username: "adm\u00efn",
      password: "p\u20ac\u{1f511}",
    }),
  );
  // The bytes of "admïn:p€🔑" in UTF-8, as Go's base64 of the string.
  const utf8 = new TextEncoder().encode("adm\u00efn:p\u20ac\u{1f511}");
  assert.deepEqual(await c.headers(), {
    Authorization: `Basic ${btoa(String.fromCharCode(...utf8))}`,
  });
});
