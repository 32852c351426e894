/**
 * Reading what a log file gained since the last read, in whole lines.
 *
 * @module
 */

/**
 * A growing text file read in increments: each {@link LogTail.take} returns the complete lines
 * written since the previous one (a line still being written is left for the next call).
 */
export class LogTail {
  readonly #path: string;
  #offset = 0;

  /** Starts at offset 0; call {@link LogTail.skip} to start at the current end. No I/O. */
  constructor(options: { path: string }) {
    this.#path = options.path;
  }

  /** Skips everything written so far (nothing when the file does not exist yet). */
  async skip(): Promise<void> {
    try {
      this.#offset = (await Deno.stat(this.#path)).size;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      this.#offset = 0;
    }
  }

  /** The complete lines written since the last call. */
  async take(): Promise<string[]> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.#path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw err;
    }
    let bytes: Uint8Array;
    try {
      const size = (await file.stat()).size;
      if (size <= this.#offset) return [];
      bytes = new Uint8Array(size - this.#offset);
      await file.seek(this.#offset, Deno.SeekMode.Start);
      let filled = 0;
      while (filled < bytes.length) {
        const n = await file.read(bytes.subarray(filled));
        if (n === null) break;
        filled += n;
      }
      bytes = bytes.subarray(0, filled);
    } finally {
      file.close();
    }
    const end = bytes.lastIndexOf(10); // "\n"
    if (end < 0) return [];
    this.#offset += end + 1;
    return new TextDecoder().decode(bytes.subarray(0, end)).split("\n");
  }
}
