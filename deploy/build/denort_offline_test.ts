import assert from "node:assert/strict";
import { denortArchiveName, parseChecksums, placeOfflineDenort } from "./denort_offline.ts";

const SUM_OF_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

async function buildDir(sumLine: string | undefined, archive: string | undefined) {
  const dir = await Deno.makeTempDir({ prefix: "denort-offline-test-" });
  await Deno.writeTextFile(`${dir}/denort.sha256`, `# comment\n\n${sumLine ?? ""}\n`);
  if (archive !== undefined) {
    await Deno.mkdir(`${dir}/denort`);
    await Deno.writeTextFile(
      `${dir}/denort/${denortArchiveName("aarch64-unknown-linux-gnu")}`,
      archive,
    );
  }
  return dir;
}

const OPTS = { target: "aarch64-unknown-linux-gnu", denoVersion: "2.9.6" };

Deno.test("placeOfflineDenort() places an archive whose SHA-256 is the repository's", async () => {
  const dir = await buildDir(`${SUM_OF_ABC}  denort-aarch64-unknown-linux-gnu.zip`, "abc");
  try {
    const placed = await placeOfflineDenort(dir, `${dir}/deno_dir`, OPTS);
    assert.equal(placed, `${dir}/deno_dir/dl/release/v2.9.6/denort-aarch64-unknown-linux-gnu.zip`);
    assert.equal(await Deno.readTextFile(placed!), "abc");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("placeOfflineDenort() refuses an archive that differs or has no checksum", async () => {
  const differs = await buildDir(`${SUM_OF_ABC}  denort-aarch64-unknown-linux-gnu.zip`, "abd");
  const unlisted = await buildDir(undefined, "abc");
  try {
    await assert.rejects(
      placeOfflineDenort(differs, `${differs}/deno_dir`, OPTS),
      /its SHA-256 is [0-9a-f]{64}, not ba7816bf/,
    );
    await assert.rejects(
      placeOfflineDenort(unlisted, `${unlisted}/deno_dir`, OPTS),
      /has no checksum for it/,
    );
    await assert.rejects(Deno.stat(`${differs}/deno_dir`), Deno.errors.NotFound, "nothing placed");
  } finally {
    await Deno.remove(differs, { recursive: true });
    await Deno.remove(unlisted, { recursive: true });
  }
});

Deno.test("placeOfflineDenort() leaves the download to deno compile without an archive", async () => {
  const dir = await buildDir(undefined, undefined);
  try {
    assert.equal(await placeOfflineDenort(dir, `${dir}/deno_dir`, OPTS), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("parseChecksums() reads sha256sum lines and the repository's file", async () => {
  assert.deepEqual(
    parseChecksums(`${SUM_OF_ABC.toUpperCase()} *a.zip\n# c\n`),
    new Map([["a.zip", SUM_OF_ABC]]),
  );
  assert.throws(() => parseChecksums("abc  a.zip"), SyntaxError);
  const shipped = await Deno.readTextFile(new URL("denort.sha256", import.meta.url));
  // No digest is shipped until one is read from the release (the file says so).
  assert.equal(parseChecksums(shipped).size, 0);
});

Deno.test("the Containerfile builds per target platform, checks the offline runtime first", async () => {
  const text = await Deno.readTextFile(new URL("../../Containerfile", import.meta.url));
  const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  // Images from ARGs that take a digest; the build stage runs on the target platform (no
  // --platform=$BUILDPLATFORM), so deno compile embeds that platform's runtime.
  assert.deepEqual(froms, ["${DENO_IMAGE}", "${BASE_IMAGE}"]);
  assert.match(text, /^ARG DENO_IMAGE=denoland\/deno:2\.9\.6$/m);
  assert.match(text, /--platform linux\/amd64,linux\/arm64/);
  const check = text.indexOf("deploy/build/denort_offline.ts deploy/build /deno-dir");
  assert.ok(check > 0 && check < text.indexOf("RUN deno task compile"), "checked before compile");
  assert.match(text, /^ARG CSI_ATTACHER_VERSION=""$/m);
});
