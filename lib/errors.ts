/**
 * The one way an error becomes text, for logs, `attachError`/`detachError`, Events and exit
 * messages alike.
 *
 * Go's `fmt.Errorf("...: %w", err)` puts the cause's text into the wrapper's; JavaScript's
 * `new Error(message, { cause })` does not, so {@link errorText} walks the `cause` chain and
 * appends what the message does not already say.
 *
 * @module
 */

/** How many causes are followed at most (a guard against cycles). */
const MAX_CAUSES = 10;

/** The text of one error without its causes: its message, or its name when that is empty. */
function ownErrorText(err: unknown): string {
  if (err instanceof Error) return err.message !== "" ? err.message : err.name;
  if (typeof err === "string") return err;
  if (typeof err === "object" && err !== null) {
    const message = (err as { message?: unknown }).message;
    if (typeof message === "string") return message;
    try {
      return JSON.stringify(err) ?? String(err);
    } catch {
      return String(err);
    }
  }
  return String(err);
}

/**
 * The text of an error: its message, then `: <cause>` for each error in its `cause` chain whose
 * text the message does not already contain (wrappers often repeat their cause).
 *
 * @example
 * ```ts
 * errorText(new Error("could not save VolumeAttachment", { cause: new Error("forbidden") }));
 * // "could not save VolumeAttachment: forbidden"
 * ```
 */
export function errorText(err: unknown): string {
  let text = ownErrorText(err);
  let cause: unknown = err instanceof Error ? err.cause : undefined;
  for (let depth = 0; cause !== undefined && cause !== null && depth < MAX_CAUSES; depth++) {
    const causeText = ownErrorText(cause);
    if (causeText !== "" && !text.includes(causeText)) text += `: ${causeText}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}
