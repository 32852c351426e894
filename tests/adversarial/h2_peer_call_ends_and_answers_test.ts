/** The hostile HTTP/2 peer table (`./h2_peer.ts`): GOAWAY and RST_STREAM at every point of a call, slow and silent peers, malformed gRPC answers. */

import { testShard } from "./h2_peer.ts";

testShard("call_ends_and_answers");
