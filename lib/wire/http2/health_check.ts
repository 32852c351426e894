/**
 * The health check of an HTTP/2 connection, as Go's `x/net/http2` Transport runs it when
 * `ReadIdleTimeout` is set (`h2_bundle.go` `ClientConn.healthCheck`; client-go sets
 * `ReadIdleTimeout` 30 s and `PingTimeout` 15 s in `k8s.io/apimachinery/pkg/util/net/http.go`
 * `readIdleTimeoutSeconds`, `pingTimeoutSeconds`): when nothing was received for the read idle
 * timeout, a PING goes out; when its ACK does not come within the ping timeout, the connection is
 * lost and closed, and every stream on it fails.
 *
 * The reader only notes the time of each read ({@link HealthCheck.heard}); one timer looks at it
 * when it fires and sleeps again for the rest, so a busy connection costs no timer per read.
 *
 * @module
 */

import type { Clock, Timer } from "../../clock.ts";

/** What a {@link HealthCheck} needs of its connection. */
export interface HealthCheckOptions {
  /** Silence after which a PING is sent. */
  readIdleTimeoutMs: number;
  /** How long the PING's ACK may take. */
  pingTimeoutMs: number;
  /** Sends a PING (not an ACK) with this 8-octet payload. */
  ping(payload: Uint8Array): void;
  /** The PING went unanswered: close the connection. */
  lost(): void;
}

/** Watches one connection's reads; see the module doc. */
export class HealthCheck {
  readonly #clock: Clock;
  readonly #options: HealthCheckOptions;
  #lastHeard: number;
  #timer: Timer | undefined;
  #outstanding: Uint8Array | undefined;
  #counter = 0;
  #stopped = false;

  constructor(clock: Clock, options: HealthCheckOptions) {
    this.#clock = clock;
    this.#options = options;
    this.#lastHeard = clock.now();
    this.#arm(options.readIdleTimeoutMs);
  }

  /** Something was read from the connection. */
  heard(): void {
    this.#lastHeard = this.#clock.now();
  }

  /** A PING ACK arrived with `payload`. */
  acked(payload: Uint8Array): void {
    const sent = this.#outstanding;
    if (sent === undefined || !sent.every((b, i) => payload[i] === b)) return;
    this.#outstanding = undefined;
    this.#timer?.cancel();
    this.#arm(this.#options.readIdleTimeoutMs);
  }

  /** The connection ended: no more timers. */
  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #arm(ms: number): void {
    if (this.#stopped) return;
    this.#timer = this.#clock.setTimer(ms, () => this.#fire());
  }

  #fire(): void {
    if (this.#stopped) return;
    if (this.#outstanding !== undefined) {
      this.stop();
      this.#options.lost();
      return;
    }
    const silent = this.#clock.now() - this.#lastHeard;
    const idle = this.#options.readIdleTimeoutMs;
    if (silent < idle) {
      this.#arm(idle - silent);
      return;
    }
    const payload = new Uint8Array(8);
    new DataView(payload.buffer).setUint32(4, ++this.#counter);
    this.#outstanding = payload;
    this.#options.ping(payload);
    this.#arm(this.#options.pingTimeoutMs);
  }
}
