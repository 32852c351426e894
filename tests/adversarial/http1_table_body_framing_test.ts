/** The hostile HTTP/1.1 server table (`./http1_table.ts`): Content-Length, Transfer-Encoding and chunked bodies. */

import { testShard } from "./http1_table.ts";

testShard("body_framing");
