/**
 * Certificates and keys for the local cluster, made with `openssl` at run time: a CA, the API
 * server's serving certificate for 127.0.0.1, the service-account signing key pair, and one client
 * certificate per user (the user name is the certificate's CN, its groups the O entries); and the
 * kubeconfigs of either kind of credential: a client certificate or a (ServiceAccount) token.
 *
 * @module
 */

import { runOk } from "./exec.ts";

/** A client identity to issue a certificate for. */
export interface ClientIdentity {
  /** File name stem, e.g. `admin`. */
  id: string;
  /** User name (CN), e.g. `system:serviceaccount:default:csi-attacher`. */
  user: string;
  /** Groups (O), e.g. `["system:masters"]`. */
  groups: string[];
}

/** PEM file paths of a certificate and its key. */
export interface CertPair {
  cert: string;
  key: string;
}

/** What {@link makeCertificates} wrote. */
export interface ClusterCertificates {
  /** The CA certificate (trusted for serving and client certificates). */
  ca: CertPair;
  /** The API server's serving certificate (SAN IP:127.0.0.1, DNS:localhost). */
  server: CertPair;
  /** RSA private key signing service-account tokens. */
  serviceAccountKey: string;
  /** Its public key, for verifying tokens. */
  serviceAccountPublicKey: string;
  /** Client certificates by {@link ClientIdentity.id}. */
  clients: Record<string, CertPair>;
}

/** How long the CA and every certificate are valid (openssl `-days`). */
export const VALID_DAYS = 2;
const DAYS = String(VALID_DAYS);

function ecKeyArgs(): string[] {
  return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
}

/** A DN for `openssl -subj`, with `/` and `,` escaped in values. */
function subject(cn: string, groups: string[]): string {
  const esc = (v: string) => v.replace(/[/\\,+=]/g, (c) => `\\${c}`);
  return groups.map((g) => `/O=${esc(g)}`).join("") + `/CN=${esc(cn)}`;
}

async function issue(
  dir: string,
  ca: CertPair,
  stem: string,
  subj: string,
  extensions: string,
): Promise<CertPair> {
  const pair = { cert: `${dir}/${stem}.crt`, key: `${dir}/${stem}.key` };
  const csr = `${dir}/${stem}.csr`;
  const ext = `${dir}/${stem}.ext`;
  await runOk("openssl", ["req", ...ecKeyArgs(), "-keyout", pair.key, "-out", csr, "-subj", subj]);
  await Deno.writeTextFile(ext, extensions);
  await runOk("openssl", [
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    ca.cert,
    "-CAkey",
    ca.key,
    "-CAcreateserial",
    "-days",
    DAYS,
    "-extfile",
    ext,
    "-out",
    pair.cert,
  ]);
  await Deno.remove(csr);
  await Deno.remove(ext);
  await Deno.chmod(pair.key, 0o600);
  return pair;
}

/**
 * Writes a fresh CA, serving certificate, service-account key pair and client certificates to
 * `dir` (which must exist). Private keys are made readable by the owner only.
 *
 * @throws {Error} when openssl is missing or fails.
 */
export async function makeCertificates(
  dir: string,
  clients: readonly ClientIdentity[],
): Promise<ClusterCertificates> {
  const ca = { cert: `${dir}/ca.crt`, key: `${dir}/ca.key` };
  await runOk("openssl", [
    "req",
    "-x509",
    ...ecKeyArgs(),
    "-keyout",
    ca.key,
    "-out",
    ca.cert,
    "-days",
    DAYS,
    "-subj",
    "/CN=csi-attacher-e2e-ca",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
  ]);
  await Deno.chmod(ca.key, 0o600);
  const server = await issue(
    dir,
    ca,
    "apiserver",
    "/CN=kube-apiserver",
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n" +
      "keyUsage=critical,digitalSignature,keyEncipherment\n",
  );
  const serviceAccountKey = `${dir}/sa.key`;
  const serviceAccountPublicKey = `${dir}/sa.pub`;
  await runOk("openssl", [
    "genpkey",
    "-algorithm",
    "RSA",
    "-pkeyopt",
    "rsa_keygen_bits:2048",
    "-out",
    serviceAccountKey,
  ]);
  await Deno.chmod(serviceAccountKey, 0o600);
  await runOk("openssl", [
    "pkey",
    "-in",
    serviceAccountKey,
    "-pubout",
    "-out",
    serviceAccountPublicKey,
  ]);
  const issued: Record<string, CertPair> = {};
  for (const client of clients) issued[client.id] = await issueClient(dir, ca, client);
  return { ca, server, serviceAccountKey, serviceAccountPublicKey, clients: issued };
}

/**
 * Issues one more client certificate from the CA of {@link makeCertificates} (`<dir>/ca.crt` and
 * `ca.key`), written to `dir` as `client-<id>.crt` and `.key`.
 *
 * @throws {Error} when openssl is missing or fails.
 */
export function issueClient(dir: string, ca: CertPair, client: ClientIdentity): Promise<CertPair> {
  return issue(
    dir,
    ca,
    `client-${client.id}`,
    subject(client.user, client.groups),
    "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n",
  );
}

/** How a kubeconfig's user authenticates: a client certificate and its key (PEM), or a token. */
export type KubeconfigCredential = { certPem: string; keyPem: string } | { token: string };

/**
 * A kubeconfig (YAML) for `server` with the CA (PEM) and the credential embedded as data, as kind
 * and kubeadm write them; a token goes in `token`, as a bearer token (client-go
 * `tools/clientcmd/api/v1` `AuthInfo.Token`).
 */
export function kubeconfigText(
  server: string,
  caPem: string,
  user: string,
  credential: KubeconfigCredential,
): string {
  const auth = "token" in credential ? [`    token: ${JSON.stringify(credential.token)}`] : [
    `    client-certificate-data: ${btoa(credential.certPem)}`,
    `    client-key-data: ${btoa(credential.keyPem)}`,
  ];
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: e2e",
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${btoa(caPem)}`,
    "users:",
    `- name: ${JSON.stringify(user)}`,
    "  user:",
    ...auth,
    "contexts:",
    "- name: e2e",
    "  context:",
    "    cluster: e2e",
    `    user: ${JSON.stringify(user)}`,
    "current-context: e2e",
    "",
  ].join("\n");
}

/** {@link kubeconfigText} of the CA file `ca` and a client certificate's files. */
export async function kubeconfigFor(
  server: string,
  ca: string,
  client: CertPair,
  user: string,
): Promise<string> {
  return kubeconfigText(server, await Deno.readTextFile(ca), user, {
    certPem: await Deno.readTextFile(client.cert),
    keyPem: await Deno.readTextFile(client.key),
  });
}

/** {@link kubeconfigText} of the CA file `ca` and a bearer token (a ServiceAccount's). */
export async function tokenKubeconfig(
  server: string,
  ca: string,
  token: string,
  user: string,
): Promise<string> {
  return kubeconfigText(server, await Deno.readTextFile(ca), user, { token });
}
