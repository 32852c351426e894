/**
 * What a chaos schedule did: the step counter, a running sequence number that orders everything
 * that happens inside a step, the recent trace lines (printed when an invariant breaks), a hash of
 * the whole trace (to prove that a seed replays exactly) and counters of faults and user actions.
 *
 * @module
 */

/** The trace and counters of one schedule. */
export class Journal {
  /** Number of steps taken so far. */
  step = 0;
  #seq = 0;
  #limit: number;
  #recent: string[] = [];
  #hash = 0x811c9dc5;
  #counts = new Map<string, number>();
  #echo: ((line: string) => void) | undefined;

  /**
   * @param opts.limit how many recent lines to keep (default 60).
   * @param opts.echo receives every line as it is written (full traces for replays).
   */
  constructor(opts: { limit?: number; echo?: (line: string) => void } = {}) {
    this.#limit = opts.limit ?? 60;
    this.#echo = opts.echo;
  }

  /** A new sequence number: orders acknowledgements, creations and writes within a step. */
  nextSeq(): number {
    return ++this.#seq;
  }

  /** Appends a trace line (prefixed with the step number). */
  note(line: string): void {
    const text = `#${this.step} ${line}`;
    this.#recent.push(text);
    if (this.#recent.length > this.#limit) this.#recent.shift();
    for (let i = 0; i < text.length; i++) {
      this.#hash = Math.imul(this.#hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
    }
    this.#echo?.(text);
  }

  /** Counts one occurrence of `kind` (a fault or a user action) and traces it. */
  count(kind: string, detail = ""): void {
    this.#counts.set(kind, (this.#counts.get(kind) ?? 0) + 1);
    this.note(detail === "" ? kind : `${kind} ${detail}`);
  }

  /** The counters, sorted by name. */
  counts(): Record<string, number> {
    return Object.fromEntries([...this.#counts.entries()].sort(([a], [b]) => a < b ? -1 : 1));
  }

  /** The last lines written, oldest first. */
  recent(): string[] {
    return [...this.#recent];
  }

  /** FNV-1a hash of every line written: equal hashes mean equal traces. */
  traceHash(): string {
    return this.#hash.toString(16).padStart(8, "0");
  }
}
