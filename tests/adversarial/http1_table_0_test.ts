/** Shard 0 of the hostile HTTP/1.1 server table (`./http1_table.ts`), and the check that every shard runs. */

import { SHARDS, testShard } from "./http1_table.ts";
import { assertShardFiles } from "./shards.ts";

Deno.test("hostile HTTP/1.1 servers: every row runs in one of the shard files", () =>
  assertShardFiles(new URL("./http1_table.ts", import.meta.url), SHARDS));

testShard(0);
