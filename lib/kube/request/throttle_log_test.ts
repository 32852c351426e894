import assert from "node:assert/strict";
import { logThrottleWait, retryReason, ThrottledLogger, WAITED_MESSAGE } from "./throttle_log.ts";
import { FakeClock } from "../../../testkit/fakes/fake_clock.ts";
import { FakeLogger } from "../../../testkit/fakes/fake_logger.ts";

const wait = (waitedMs: number) => ({ waitedMs, reason: "r", verb: "GET", url: "https://h/x" });

Deno.test("logThrottleWait(): nothing up to 50 ms, V(3) above, the throttled logger above 1 s", () => {
  const clock = new FakeClock(0);
  const log = new FakeLogger(3);
  const throttled = new ThrottledLogger(clock);
  logThrottleWait(log, throttled, wait(50));
  assert.equal(log.lines.length, 0);
  logThrottleWait(log, throttled, wait(50.5));
  logThrottleWait(log, throttled, wait(1000));
  logThrottleWait(log, throttled, wait(1234.5));
  assert.deepEqual(log.withMessage(WAITED_MESSAGE).map((l) => [l.v, l.fields.delay]), [
    [3, "50.5ms"],
    [3, "1s"],
    [3, "1.2345s"],
    [2, "1.2345s"],
  ]);
});

Deno.test("ThrottledLogger: V(2) once a second when enabled, else level 0 once every 10 s", () => {
  const clock = new FakeClock(0);
  const verbose = new FakeLogger(2);
  const quiet = new FakeLogger(0);
  const throttled = new ThrottledLogger(clock);
  for (let ms = 0; ms <= 20_000; ms += 500) {
    throttled.info(verbose, "m", {});
    throttled.info(quiet, "m", {});
    clock.advance(500);
  }
  assert.equal(verbose.lines.length, 21, "at 0, 1 s, … 20 s");
  assert.ok(verbose.lines.every((l) => l.v === 2));
  assert.equal(quiet.lines.length, 3, "at 0, 10 s and 20 s");
  assert.ok(quiet.lines.every((l) => l.v === 0));
});

Deno.test("retryReason() words a retry's wait as client-go's getRetryReason", () => {
  assert.equal(
    retryReason(1, 2, { status: 429, flowSchemaUid: "abc" }),
    'retries: 1, retry-after: 2s - retry-reason: due to server-side throttling, FlowSchema UID: "abc"',
  );
  assert.equal(
    retryReason(2, 1, { error: "connection reset" }),
    "retries: 2, retry-after: 1s - retry-reason: due to retryable error, error: connection reset",
  );
  assert.equal(
    retryReason(3, 5, { status: 503 }),
    "retries: 3, retry-after: 5s - retry-reason: 503",
  );
});
