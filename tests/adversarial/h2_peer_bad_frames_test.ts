/** The hostile HTTP/2 peer table (`./h2_peer.ts`): bad frame sizes and lengths, frames on the wrong stream or in the wrong state. */

import { testShard } from "./h2_peer.ts";

testShard("bad_frames");
