/**
 * The hostile HTTP/1.1 server table (`./http1_table.ts`): status lines and field lines; and the check that
 * every row runs in one of the shard files.
 */

import { ROWS, SHARDS, testShard } from "./http1_table.ts";
import { assertShardFiles } from "./shards.ts";

Deno.test("hostile HTTP/1.1 servers: every row runs in one of the shard files", () =>
  assertShardFiles(new URL("./http1_table.ts", import.meta.url), ROWS, SHARDS));

testShard("status_and_fields");
