/** Shard 3 of the hostile HTTP/2 peer table (`./h2_peer.ts`). */

import { testShard } from "./h2_peer.ts";

testShard(3);
