/**
 * A {@link KubeRequestObserver} for tests that keeps everything a `KubeClient` reports, in order.
 *
 * @module
 */

import type {
  KubeRequestObserver,
  LatencyInfo,
  RequestInfo,
  RetryInfo,
} from "../../lib/kube/request_reports.ts";

/**
 * Keeps each report in the list of its kind; `onTry`, when given, is also called at the end of
 * each try (for tests that count the tries in flight).
 *
 * @example
 * ```ts ignore
 * const observer = new RecordingKubeObserver();
 * const client = new KubeClient({ connection, observer });
 * await client.get(VOLUME_ATTACHMENTS, "va1");
 * observer.tries[0]?.code; // 200
 * ```
 */
export class RecordingKubeObserver implements KubeRequestObserver {
  readonly tries: RequestInfo[] = [];
  readonly retries: RetryInfo[] = [];
  readonly durations: LatencyInfo[] = [];
  readonly rateLimiterWaits: LatencyInfo[] = [];
  readonly #onTry: ((info: RequestInfo) => void) | undefined;

  constructor(hooks: { onTry?: (info: RequestInfo) => void } = {}) {
    this.#onTry = hooks.onTry;
  }

  observeApiRequest(info: RequestInfo): void {
    this.tries.push(info);
    this.#onTry?.(info);
  }

  observeApiRetry(info: RetryInfo): void {
    this.retries.push(info);
  }

  observeApiRequestDuration(info: LatencyInfo): void {
    this.durations.push(info);
  }

  observeRateLimiterWait(info: LatencyInfo): void {
    this.rateLimiterWaits.push(info);
  }
}
