/**
 * How `Http2Session.open` turns a request stream into a streamed one: the hooks the session
 * calls (the response headers, the body's DATA into a {@link StreamBody}) and the
 * {@link StreamingStream} the caller reads.
 *
 * @module
 */

import type { StreamError } from "./stream_error.ts";
import type { FencedError } from "../../lease_fence.ts";
import type { HeaderField } from "./hpack.ts";
import type { ClientStream, StreamingStream } from "./session_types.ts";
import type { StreamState } from "./stream_state.ts";
import { StreamBody } from "./stream_body.ts";

/** What a streamed request adds to its stream (see `Http2Session.open`). */
export interface StreamHooks {
  readonly body: StreamBody;
  /** The response headers arrived without END_STREAM. */
  readonly onHead: (fields: HeaderField[]) => void;
  /** Whether the headers came. */
  headed: boolean;
  /** The stream's state, set by the session once made. */
  state?: StreamState;
  readonly head: Promise<HeaderField[]>;
  /** Settles {@link head} with the stream's end when no headers came first. */
  readonly settle: (fields: HeaderField[] | undefined, err?: StreamError | FencedError) => void;
}

/** The hooks of one streamed request; `consumed` gives window back for octets read. */
export function openHooks(consumed: (octets: number) => void): StreamHooks {
  let resolve!: (fields: HeaderField[]) => void;
  let reject!: (e: StreamError | FencedError) => void;
  const head = new Promise<HeaderField[]>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  head.catch(() => {});
  const hooks: StreamHooks = {
    body: new StreamBody({ consumed }),
    headed: false,
    head,
    onHead: (fields) => {
      hooks.headed = true;
      resolve(fields);
    },
    settle: (fields, err) => {
      if (hooks.headed) return;
      if (err !== undefined) reject(err);
      else resolve(fields ?? []);
    },
  };
  return hooks;
}

/** The streamed form of `stream`: its end ends the body, its failure fails the body. */
export function streamingOf(stream: ClientStream, hooks: StreamHooks): StreamingStream {
  stream.response.then(
    (r) => {
      hooks.settle(r.headers);
      hooks.body.end();
    },
    (err: StreamError | FencedError) => {
      hooks.settle(undefined, err);
      hooks.body.fail(err);
    },
  );
  return { head: hooks.head, body: hooks.body, cancel: stream.cancel };
}
