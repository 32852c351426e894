/**
 * Throwaway TLS material for tests, made with the `openssl` command: a CA, a server certificate it
 * signed for given subject alternative names, and a client certificate (CN=alice). Tests that need
 * it are skipped where {@link hasOpenssl} is false, unless `OPENSSL_REQUIRED=1` (as `.ci/run`
 * sets): then a missing openssl fails them instead of hiding them.
 *
 * @module
 */

/**
 * True when the openssl command can run here.
 *
 * @throws {Error} when it cannot and the environment says `OPENSSL_REQUIRED=1`.
 */
export function hasOpenssl(): boolean {
  const found = opensslRuns();
  if (!found && opensslRequired()) {
    throw new Error("OPENSSL_REQUIRED=1 but the openssl command cannot run here");
  }
  return found;
}

function opensslRuns(): boolean {
  try {
    return new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotCapable) return false;
    throw err;
  }
}

function opensslRequired(): boolean {
  try {
    return Deno.env.get("OPENSSL_REQUIRED") === "1";
  } catch (err) {
    if (err instanceof Deno.errors.NotCapable) return false;
    throw err;
  }
}

/** Runs openssl in `dir`. */
async function openssl(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
}

/** PEM texts made by {@link makePki}. */
export interface Pki {
  /** PEM of the CA. */
  ca: string;
  /** PEM of a server certificate the CA signed, and its key. */
  cert: string;
  key: string;
  /** PEM of a client certificate (CN=alice) the CA signed, and its key. */
  clientCert: string;
  clientKey: string;
}

/** A CA, a server certificate with subject alternative names `san` (openssl syntax), a client one. */
export async function makePki(san: string): Promise<Pki> {
  const dir = await Deno.makeTempDir();
  try {
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    await openssl(
      dir,
      ...["req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2"],
      ...["-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE"],
      ...["-addext", "keyUsage=critical,keyCertSign"],
    );
    await openssl(
      dir,
      ...["req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=server"],
    );
    await Deno.writeTextFile(
      `${dir}/ext.cnf`,
      `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
    );
    await openssl(
      dir,
      ...["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key"],
      ...["-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf"],
    );
    await openssl(
      dir,
      ...["req", ...ec, "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=alice"],
    );
    await Deno.writeTextFile(`${dir}/client.cnf`, "extendedKeyUsage=clientAuth\n");
    await openssl(
      dir,
      ...["x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key"],
      ...["-CAcreateserial", "-out", "client.crt", "-days", "2", "-extfile", "client.cnf"],
    );
    return {
      clientCert: await Deno.readTextFile(`${dir}/client.crt`),
      clientKey: await Deno.readTextFile(`${dir}/client.key`),
      ca: await Deno.readTextFile(`${dir}/ca.crt`),
      cert: await Deno.readTextFile(`${dir}/server.crt`),
      key: await Deno.readTextFile(`${dir}/server.key`),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
