/** The hostile HTTP/1.1 server table (`./http1_table.ts`): interim answers, bodies without end, slow, silent and closing servers, idle connections. */

import { testShard } from "./http1_table.ts";

testShard("interim_slow_and_closing");
