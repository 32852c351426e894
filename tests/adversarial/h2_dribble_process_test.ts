/**
 * The headline row of CVE-2019-9511 from the client's side, with the server in another process so
 * that the client's whole memory is measured: a 3 MiB answer (under the 4 MiB message limit) in
 * one-octet DATA frames. The call must answer, and the client's peak RSS grow by at most
 * {@link RSS_BUDGET_MIB} (1.4 GB before its DATA went into one array per stream). The same
 * measurement at every frame size is `bench/h2_frame_size.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { measure } from "../../bench/h2_frame_size.ts";

/** The budget of peak RSS growth for a ≤ 4 MiB answer, in MiB. */
const RSS_BUDGET_MIB = 64;

Deno.test("CVE-2019-9511 data dribble: a 3 MiB answer in one-octet frames, server in another process", async () => {
  const result = await measure(1, 3, 30_000);
  assert.equal(result.outcome, "OK", JSON.stringify(result));
  assert.equal(result.bytes, 3 * 1024 * 1024);
  assert.ok(result.rssGrowthMiB <= RSS_BUDGET_MIB, JSON.stringify(result));
});
