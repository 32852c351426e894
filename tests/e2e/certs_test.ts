import assert from "node:assert/strict";
import { connectionFromKubeconfigs } from "../../lib/kube/config.ts";
import { kubeconfigText } from "./certs.ts";

const CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
const USER = "system:serviceaccount:default:csi-attacher";
// The shape of a TokenRequest answer's token (a JWT: base64url parts joined by dots).
const TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl-_";

Deno.test("kubeconfigText() of a token: the token as the user's bearer token, no certificate", async () => {
  const text = kubeconfigText("https://127.0.0.1:6443", CA, USER, { token: TOKEN });
  assert.equal(
    text,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: e2e",
      "  cluster:",
      "    server: https://127.0.0.1:6443",
      `    certificate-authority-data: ${btoa(CA)}`,
      "users:",
      `- name: "${USER}"`,
      "  user:",
      `    token: "${TOKEN}"`,
      "contexts:",
      "- name: e2e",
      "  context:",
      "    cluster: e2e",
      `    user: "${USER}"`,
      "current-context: e2e",
      "",
    ].join("\n"),
  );
  // The attacher's own loader reads it as a pod's token: a bearer token, no client certificate.
  const connection = await connectionFromKubeconfigs([{ file: "/x/attacher.kubeconfig", text }]);
  assert.equal(connection.server, "https://127.0.0.1:6443");
  assert.deepEqual(await connection.headers(), { Authorization: `Bearer ${TOKEN}` });
  assert.equal(connection.tls.cert, undefined);
  assert.equal(connection.tls.key, undefined);
  assert.equal(new TextDecoder().decode(connection.tls.ca), CA);
});

Deno.test("kubeconfigText() of a client certificate embeds the certificate and key", async () => {
  const credential = { certPem: "CERT\n", keyPem: "KEY\n" };
  const text = kubeconfigText("https://127.0.0.1:6443", CA, USER, credential);
  assert.match(text, new RegExp(`\n    client-certificate-data: ${btoa("CERT\n")}\n`));
  assert.match(text, new RegExp(`\n    client-key-data: ${btoa("KEY\n")}\n`));
  assert.doesNotMatch(text, /token/);
  const connection = await connectionFromKubeconfigs([{ file: "/x/attacher.kubeconfig", text }]);
  assert.deepEqual(await connection.headers(), {});
  assert.equal(new TextDecoder().decode(connection.tls.cert), "CERT\n");
  assert.equal(new TextDecoder().decode(connection.tls.key), "KEY\n");
});
