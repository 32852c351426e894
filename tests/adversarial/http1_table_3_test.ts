/** Shard 3 of the hostile HTTP/1.1 server table (`./http1_table.ts`). */

import { testShard } from "./http1_table.ts";

testShard(3);
