/** The hostile HTTP/2 peer table (`./h2_peer.ts`): bad HPACK and window abuse. */

import { testShard } from "./h2_peer.ts";

testShard("hpack_and_windows");
