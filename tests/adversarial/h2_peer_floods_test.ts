/**
 * The hostile HTTP/2 peer table (`./h2_peer.ts`): floods of control frames and the 2019 attack family; and the check that
 * every row runs in one of the shard files.
 */

import { ROWS, SHARDS, testShard } from "./h2_peer.ts";
import { assertShardFiles } from "./shards.ts";

Deno.test("hostile HTTP/2 peer: every row runs in one of the shard files", () =>
  assertShardFiles(new URL("./h2_peer.ts", import.meta.url), ROWS, SHARDS));

testShard("floods");
