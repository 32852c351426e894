/**
 * `deno run --allow-read=<build dir> --allow-write=<DENO_DIR> denort_offline.ts <build dir>
 * <DENO_DIR>`: puts an offline copy of Deno's base runtime where `deno compile` looks before it
 * downloads one (`<DENO_DIR>/dl/release/v<deno version>/denort-<target>.zip`), once its SHA-256
 * matches the line for it in `<build dir>/denort.sha256` (`sha256sum` format). Without
 * `<build dir>/denort/denort-<target>.zip` it does nothing: `deno compile` downloads the runtime.
 * The Containerfile runs it before `deno task compile`.
 *
 * @module
 */

/** The runtime archive's name for this platform (`Deno.build.target`, e.g. `x86_64-unknown-linux-gnu`). */
export function denortArchiveName(target: string = Deno.build.target): string {
  return `denort-${target}.zip`;
}

/**
 * The checksums of a `sha256sum` file: archive name → lower-case hex digest. Lines starting with
 * `#` and blank lines are skipped.
 *
 * @throws {SyntaxError} for any other line that is not `<64 hex digits>  <name>`
 */
export function parseChecksums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([0-9a-fA-F]{64}) [ *]?(\S+)$/.exec(line);
    if (m === null) throw new SyntaxError(`Cannot read checksum line: ${JSON.stringify(line)}`);
    sums.set(m[2]!, m[1]!.toLowerCase());
  }
  return sums;
}

async function sha256Hex(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Checks and places the offline runtime (see the module doc).
 *
 * @returns where it was placed, or undefined when there is none to place.
 * @throws {Error} when the archive has no checksum line or its digest differs.
 */
export async function placeOfflineDenort(
  buildDir: string,
  denoDir: string,
  options: { target?: string; denoVersion?: string } = {},
): Promise<string | undefined> {
  const name = denortArchiveName(options.target);
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = await Deno.readFile(`${buildDir}/denort/${name}`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  const sums = parseChecksums(await Deno.readTextFile(`${buildDir}/denort.sha256`));
  const expected = sums.get(name);
  if (expected === undefined) {
    throw new Error(
      `Cannot use the offline ${name}: ${buildDir}/denort.sha256 has no checksum for it`,
    );
  }
  const actual = await sha256Hex(bytes);
  if (actual !== expected) {
    throw new Error(`Cannot use the offline ${name}: its SHA-256 is ${actual}, not ${expected}`);
  }
  const dir = `${denoDir}/dl/release/v${options.denoVersion ?? Deno.version.deno}`;
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeFile(`${dir}/${name}`, bytes);
  return `${dir}/${name}`;
}

if (import.meta.main) {
  const [buildDir, denoDir] = Deno.args;
  if (buildDir === undefined || denoDir === undefined) {
    throw new Error("usage: denort_offline.ts <build dir> <DENO_DIR>");
  }
  const placed = await placeOfflineDenort(buildDir, denoDir);
  console.log(
    placed === undefined
      ? `no offline ${denortArchiveName()}: deno compile downloads it`
      : `checked and placed ${placed}`,
  );
}
