/**
 * How {@link import("../client.ts").KubeClient} sends one request it has built: the request
 * sender. It owns what every request goes through between the client's verbs and the wire, as
 * client-go's `rest.Request` does (`rest/request.go`, `request` and `Watch`): the wait for the rate
 * limiter and its log (`./throttle_log.ts`), the credential headers, the timeout counted from
 * the last byte and the deadline of one try, reading the answer (`./body.ts`), its error
 * (`./status_errors.ts`, `./protobuf_answer.ts`) or the lack of one (`./connection_errors.ts`),
 * the retries (`./retry.ts`), the reports to the observer, and the watch's stream, guard and idle
 * watchdog (`./watch_stream.ts`). `close()` ends every request under way and lets go of the
 * transport.
 *
 * @module
 */

import { ApiError, type WatchEvent } from "../api.ts";
import type { Logger } from "../../observe/logger.ts";
import type { ClusterConnection, CredentialHeaders } from "../config.ts";
import { sameCredentials } from "./credential_headers.ts";
import type { Transport, TransportResponse } from "./transport.ts";
import type { TransportUse } from "./shared_transport.ts";
import { ABORTED, raceAbort } from "../../abort.ts";
import type { KubeObject } from "../types.ts";
import { FencedError } from "../../lease_fence.ts";
import type { Clock, Timer } from "../../clock.ts";
import { tryParseJson } from "../json.ts";
import { type RequestBody, type RequestContext, requestFailure } from "./request.ts";
import { errorFromResponse } from "./status_errors.ts";
import { clientClosedError, connectionError } from "./connection_errors.ts";
import { type Answer, MAX_RETRIES, retryDelayMs } from "./retry.ts";
import { answerOrAbort, readBytes, readText, WHOLE_BODY_MAX_BYTES } from "./body.ts";
import {
  asksForProtobuf,
  errorFromProtobuf,
  isProtobuf,
  PROTOBUF_ACCEPT,
  protobufBody,
} from "./protobuf_answer.ts";
import { IdleWatchdog, watchEvents } from "./watch_stream.ts";
import {
  CLIENT_SIDE_THROTTLING,
  logThrottleWait,
  retryReason,
  type ThrottledLogger,
} from "./throttle_log.ts";
import { errorText } from "../../errors.ts";
import type { KubeRequestObserver, RequestRateLimiter } from "../request_reports.ts";

/** Collaborators of a {@link RequestSender}: the client's (see `KubeClientDeps`). */
export interface SenderDeps {
  connection: ClusterConnection;
  transport: TransportUse;
  rateLimiter: RequestRateLimiter | undefined;
  observer: KubeRequestObserver | undefined;
  throttledLogger: ThrottledLogger;
  clock: Clock;
  log: Logger | undefined;
}

/** The client's options as the sender uses them, defaults applied (see `KubeClientOptions`). */
export interface SenderSettings {
  userAgent: string;
  timeoutMs: number;
  deadlineMs: number;
  maxBodyBytes: number;
  watchGraceMs: number;
  protobuf: boolean;
}

/** What a watch adds to its request: how long the server keeps it open, how long it may idle. */
export interface WatchLimits {
  timeoutSeconds: number;
  idleTimeoutMs?: number;
}

/** Sends the requests of one client; see the module doc. */
export class RequestSender {
  readonly #connection: ClusterConnection;
  readonly #rateLimiter: RequestRateLimiter | undefined;
  readonly #observer: KubeRequestObserver | undefined;
  readonly #throttledLogger: ThrottledLogger;
  readonly #clock: Clock;
  readonly #log: Logger | undefined;
  readonly #userAgent: string;
  readonly #timeoutMs: number;
  readonly #deadlineMs: number;
  readonly #maxBodyBytes: number;
  readonly #watchGraceMs: number;
  readonly #protobuf: boolean;
  readonly #transport: TransportUse;
  /** The header lines of the last credentials, by content type ("" without a body). */
  #headerLines:
    | { credentials: CredentialHeaders; byContentType: Map<string, [string, string][]> }
    | undefined;
  /** One controller per request or watch under way; {@link close} aborts them. */
  readonly #inflight = new Set<AbortController>();
  #closed = false;

  constructor(deps: SenderDeps, settings: SenderSettings) {
    this.#connection = deps.connection;
    this.#transport = deps.transport;
    this.#rateLimiter = deps.rateLimiter;
    this.#observer = deps.observer;
    this.#throttledLogger = deps.throttledLogger;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#userAgent = settings.userAgent;
    this.#timeoutMs = settings.timeoutMs;
    this.#deadlineMs = settings.deadlineMs;
    this.#maxBodyBytes = settings.maxBodyBytes;
    this.#watchGraceMs = settings.watchGraceMs;
    this.#protobuf = settings.protobuf;
  }

  /**
   * Ends every request and watch under way (they reject with a `ConnectionError` saying the
   * client is closed), then lets go of the transport. Later requests reject the same way.
   */
  close(): void {
    this.#closed = true;
    const closed = clientClosedError();
    for (const controller of this.#inflight) controller.abort(closed);
    this.#inflight.clear();
    this.#transport.release();
  }

  /** Whether the request of `ctx` asks for protobuf (`./protobuf_answer.ts`). */
  #asksForProtobuf(ctx: RequestContext): boolean {
    return this.#protobuf && asksForProtobuf(ctx.method, ctx.resource);
  }

  /** The transport of this client (its own or its configuration's), built on first use. */
  #getTransport(): Transport {
    if (this.#closed) throw clientClosedError();
    return this.#transport.transport();
  }

  /**
   * Request header lines with fresh credentials; a list is sent as repeated lines. The lines are
   * made once per credentials and content type and shared by the requests that use them (the
   * transport only reads them); new credentials (a rotated token) make new lines.
   */
  async #headers(body?: RequestBody, protobuf = false): Promise<[string, string][]> {
    const credentials = await this.#connection.headers();
    let made = this.#headerLines;
    if (made === undefined || !sameCredentials(made.credentials, credentials)) {
      made = this.#headerLines = { credentials, byContentType: new Map() };
    }
    const contentType = body?.contentType ?? "";
    const key = protobuf ? `protobuf ${contentType}` : contentType;
    let lines = made.byContentType.get(key);
    if (lines === undefined) {
      lines = [];
      for (const [name, value] of Object.entries(credentials)) {
        for (const v of Array.isArray(value) ? value : [value]) lines.push([name, v]);
      }
      lines.push(
        ["Accept", protobuf ? PROTOBUF_ACCEPT : "application/json"],
        ["User-Agent", this.#userAgent],
      );
      if (body !== undefined) lines.push(["Content-Type", contentType]);
      made.byContentType.set(key, lines);
    }
    return lines;
  }

  /** Logs one try at verbosity 6 and reports it to the observer; `start` is a clock reading. */
  #report(ctx: RequestContext, code: number, start: number): void {
    const seconds = (this.#clock.now() - start) / 1000;
    if (this.#log?.enabled(6)) {
      this.#log.v(6).info("HTTP", {
        verb: ctx.method,
        url: ctx.url.href,
        status: code,
        milliseconds: Math.round(seconds * 1000),
      });
    }
    this.#observer?.observeApiRequest({
      method: ctx.method,
      verb: ctx.verb,
      resource: ctx.resource.plural,
      subresource: ctx.subresource,
      host: ctx.url.host,
      code,
      seconds,
    });
  }

  /**
   * One non-watch request: rate limit, send, parse; retried as client-go retries (see
   * `./retry.ts`), each try taking its own token from the rate limiter. Resolves with the parsed
   * answer (JSON, or protobuf read into the JSON form).
   */
  async call(ctx: RequestContext): Promise<unknown> {
    const started = this.#clock.now();
    try {
      return await this.#tries(ctx);
    } finally {
      // client-go's rest_client_request_duration_seconds: the whole request, its waits for the
      // rate limiter and its retries included (`rest/request.go` `request`).
      this.#observer?.observeApiRequestDuration({
        method: ctx.method,
        host: ctx.url.host,
        seconds: (this.#clock.now() - started) / 1000,
      });
    }
  }

  /** The tries of one request, each after its wait for the rate limiter. */
  async #tries(ctx: RequestContext): Promise<unknown> {
    const { signal } = ctx;
    let reason = CLIENT_SIDE_THROTTLING;
    for (let attempt = 1;; attempt++) {
      await this.#throttle(ctx, reason);
      // The lease may have passed while this try waited for its token (seconds, with work
      // queued): asked again here, and by the transport right before the bytes are written.
      if (ctx.fence?.valid() === false) throw new FencedError();
      const start = this.#clock.now();
      let code = 0;
      let answer: Answer | undefined;
      let failure: unknown;
      let fenced = false;
      try {
        answer = await this.#send(ctx);
        code = answer.status;
      } catch (err) {
        // Refused by the fence: never sent, so neither a try to report nor one to retry.
        fenced = err instanceof FencedError;
        if (fenced) throw err;
        failure = err;
      } finally {
        if (!fenced) this.#report(ctx, code, start);
      }
      const delayMs = attempt > MAX_RETRIES || signal?.aborted
        ? undefined
        : retryDelayMs(ctx.method, answer, failure);
      if (delayMs !== undefined) {
        this.#retrying(ctx, code, attempt, delayMs);
        reason = retryReason(attempt, Math.round(delayMs / 1000), {
          status: answer?.status,
          flowSchemaUid: answer?.flowSchemaUid,
          error: answer === undefined ? errorText(failure) : undefined,
        });
        await this.#clock.sleep(delayMs, signal);
        continue;
      }
      if (answer === undefined) throw failure;
      if (answer.bytes !== undefined) {
        if (code < 200 || code > 299) throw errorFromProtobuf(code, answer.bytes);
        return protobufBody(ctx, code, answer.bytes);
      }
      if (code < 200 || code > 299) throw errorFromResponse(code, answer.text);
      const parsed = tryParseJson(answer.text);
      if (parsed === undefined) {
        throw new ApiError(code, "InvalidResponse", requestFailure(ctx, "the answer is not JSON"));
      }
      return parsed;
    }
  }

  /**
   * Waits for the rate limiter, then reports the wait and logs a long one as client-go's
   * `tryThrottleWithInfo` does (`./throttle_log.ts`). Without a rate limiter: nothing.
   */
  async #throttle(ctx: RequestContext, reason: string): Promise<void> {
    if (this.#rateLimiter === undefined) return;
    const start = this.#clock.now();
    await this.#rateLimiter.take(ctx.signal);
    const waitedMs = this.#clock.now() - start;
    this.#observer?.observeRateLimiterWait({
      method: ctx.method,
      host: ctx.url.host,
      seconds: waitedMs / 1000,
    });
    if (this.#log !== undefined) {
      logThrottleWait(this.#log, this.#throttledLogger, {
        waitedMs,
        reason,
        verb: ctx.method,
        url: ctx.url.href,
      });
    }
  }

  /** Counts and logs one retry, as client-go logs it at level 4. */
  #retrying(ctx: RequestContext, code: number, attempt: number, delayMs: number): void {
    this.#log?.v(4).info("Got a Retry-After response, retrying", {
      verb: ctx.method,
      url: ctx.url.href,
      status: code,
      attempt,
      retryAfterMs: delayMs,
    });
    this.#observer?.observeApiRetry({
      method: ctx.method,
      verb: ctx.verb,
      resource: ctx.resource.plural,
      host: ctx.url.host,
      code,
      attempt,
      delayMs,
    });
  }

  /**
   * A controller that ends one request: aborted by the caller's signal (with its reason), by a
   * timeout, or by {@link close}. `dispose` unsubscribes from the caller's signal.
   */
  #begin(signal: AbortSignal | undefined): { controller: AbortController; dispose(): void } {
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    this.#inflight.add(controller);
    return {
      controller,
      dispose: () => {
        signal?.removeEventListener("abort", onAbort);
        this.#inflight.delete(controller);
      },
    };
  }

  /** Sends a request and reads the whole answer. */
  async #send(ctx: RequestContext): Promise<Answer> {
    const { signal, body } = ctx;
    signal?.throwIfAborted();
    const transport = await this.#getTransport();
    const headers = await this.#headers(body, this.#asksForProtobuf(ctx));
    signal?.throwIfAborted();
    if (this.#closed) throw clientClosedError();
    const generation = transport.generation;
    const timeoutMs = this.#timeoutMs;
    const deadlineMs = this.#deadlineMs;
    const maxBodyBytes = this.#maxBodyBytes;
    const clock = this.#clock;
    const { controller, dispose } = this.#begin(signal);
    // The timeout counts from the last byte received, so a large answer that keeps arriving
    // (a big list) is not cut short; a silent connection is, and so is an answer still arriving
    // at the deadline.
    const start = clock.now();
    let lastProgress = start;
    let timer: Timer;
    const onTimer = () => {
      const now = clock.now();
      const silentLeft = lastProgress + timeoutMs - now;
      const deadlineLeft = start + deadlineMs - now;
      if (silentLeft > 0 && deadlineLeft > 0) {
        timer = clock.setTimer(Math.min(silentLeft, deadlineLeft), onTimer);
        return;
      }
      const what = deadlineLeft > 0
        ? `request timed out after ${timeoutMs / 1000}s`
        : `request did not complete within ${deadlineMs / 1000}s`;
      controller.abort(new ApiError(0, "Timeout", requestFailure(ctx, what)));
      // No answer on this connection: the pooled ones may have gone silent too.
      transport.renew(generation);
    };
    timer = clock.setTimer(Math.min(timeoutMs, deadlineMs), onTimer);
    try {
      const response = await answerOrAbort(
        transport.send(ctx.url, {
          method: ctx.method,
          headers,
          body: body?.data,
          signal: controller.signal,
          maxBodyBytes,
          fence: ctx.fence,
        }),
        controller.signal,
      );
      if (response === undefined) throw controller.signal.reason;
      lastProgress = clock.now();
      const read = await this.#readBody(response, controller.signal, maxBodyBytes, () => {
        lastProgress = clock.now();
      });
      if (controller.signal.aborted) throw controller.signal.reason;
      return {
        status: response.status,
        ...read,
        retryAfter: response.headers.get("retry-after") ?? undefined,
        flowSchemaUid: response.headers.get("x-kubernetes-pf-flowschema-uid") ?? undefined,
      };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // A timeout, or close().
      if (controller.signal.aborted) throw controller.signal.reason;
      if (err instanceof FencedError) throw err;
      throw connectionError(ctx, err);
    } finally {
      timer.cancel();
      dispose();
    }
  }

  /**
   * An answer's body: protobuf as bytes, anything else as text (in one read when the transport
   * has one and the length is known to be small); `onProgress` is called as pieces arrive.
   */
  async #readBody(
    response: TransportResponse,
    signal: AbortSignal,
    maxBytes: number,
    onProgress: () => void,
  ): Promise<{ text: string; bytes?: Uint8Array }> {
    const length = Number(response.headers.get("content-length") ?? NaN);
    const whole = length <= WHOLE_BODY_MAX_BYTES;
    if (isProtobuf(response.headers.get("content-type"))) {
      if (whole && response.bytes !== undefined) {
        const bytes = await raceAbort(response.bytes(), signal);
        if (bytes === ABORTED) throw signal.reason;
        return { text: "", bytes };
      }
      return {
        text: "",
        bytes: await readBytes(response.body, signal, { maxBytes, onChunk: onProgress }),
      };
    }
    if (whole && response.text !== undefined) {
      const text = await raceAbort(response.text(), signal);
      if (text === ABORTED) throw signal.reason;
      return { text };
    }
    return { text: await readText(response.body, signal, { maxBytes, onChunk: onProgress }) };
  }

  /**
   * One watch: its events until the server ends the stream, the caller's signal aborts (then it
   * just ends) or the watch fails (an {@link ApiError}). `ctx.signal` is required.
   */
  async *watch<T extends KubeObject>(
    ctx: RequestContext & { signal: AbortSignal },
    opts: WatchLimits,
  ): AsyncGenerator<WatchEvent<T>, void, undefined> {
    const { signal } = ctx;
    const transport = await this.#getTransport();
    const headers = await this.#headers(undefined, this.#asksForProtobuf(ctx));
    if (signal.aborted) return;
    if (this.#closed) throw clientClosedError();
    const generation = transport.generation;
    const clock = this.#clock;

    // Ends the watch: the caller's abort, the idle watchdog, the guard below or close(). The
    // wait for the answer, or for the next chunk of the body, then ends at once.
    const { controller, dispose } = this.#begin(signal);
    // A server that keeps the watch open past its timeoutSeconds (and the grace) is cut off.
    let guardError: ApiError | undefined;
    const guardMs = opts.timeoutSeconds * 1000 + this.#watchGraceMs;
    const guard = clock.setTimer(guardMs, () => {
      const message = `watch still open ${guardMs / 1000}s after it started`;
      controller.abort(guardError = new ApiError(0, "Timeout", requestFailure(ctx, message)));
    });
    const idle = opts.idleTimeoutMs === undefined
      ? undefined
      : new IdleWatchdog(clock, opts.idleTimeoutMs, () => controller.abort());
    const stopped = () => signal.aborted || idle?.fired === true;
    const start = clock.now();
    let reported = false;
    try {
      const response = await answerOrAbort(
        transport.send(ctx.url, { method: "GET", headers, signal: controller.signal }),
        controller.signal,
      );
      if (stopped()) {
        response?.body?.cancel().catch(() => {});
        return;
      }
      if (response === undefined) throw controller.signal.reason;
      reported = true;
      idle?.touch();
      this.#report(ctx, response.status, start);
      const protobuf = isProtobuf(response.headers.get("content-type"));
      if (response.status !== 200) {
        const read = { maxBytes: this.#maxBodyBytes };
        if (protobuf) {
          const bytes = await readBytes(response.body, controller.signal, read);
          if (controller.signal.aborted) throw controller.signal.reason;
          throw errorFromProtobuf(response.status, bytes);
        }
        const text = await readText(response.body, controller.signal, read);
        if (controller.signal.aborted) throw controller.signal.reason;
        throw errorFromResponse(response.status, text);
      }
      yield* watchEvents<T>(response, { ctx, signal: controller.signal, stopped, idle, protobuf });
    } catch (err) {
      if (stopped()) return;
      if (guardError !== undefined) throw guardError;
      if (err instanceof ApiError) throw err;
      if (!reported) this.#report(ctx, 0, start);
      throw connectionError(ctx, err);
    } finally {
      guard.cancel();
      idle?.stop();
      dispose();
      // A watch left early (the caller stopped reading, an error) releases its stream; after the
      // end of the body this changes nothing.
      controller.abort();
      if (idle?.fired) this.#silentWatch(ctx, idle, () => transport.renew(generation));
    }
  }

  /**
   * A watch that delivered neither an event nor a bookmark for `idle.ms` was closed: its
   * connection went silent, so new requests must not go out on it, nor on the other pooled
   * connections to the same server (behind the same load balancer): `renew` them.
   */
  #silentWatch(ctx: RequestContext, idle: IdleWatchdog, renew: () => void): void {
    this.#log?.v(4).info("Watch delivered neither an event nor a bookmark, closing it", {
      url: ctx.url.href,
      idleMs: idle.ms,
    });
    renew();
  }
}
