/** Shard 0 of the hostile HTTP/2 peer table (`./h2_peer.ts`), and the check that every shard runs. */

import { SHARDS, testShard } from "./h2_peer.ts";
import { assertShardFiles } from "./shards.ts";

Deno.test("hostile HTTP/2 peer: every row runs in one of the shard files", () =>
  assertShardFiles(new URL("./h2_peer.ts", import.meta.url), SHARDS));

testShard(0);
