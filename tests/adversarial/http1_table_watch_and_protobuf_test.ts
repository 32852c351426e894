/** The hostile HTTP/1.1 server table (`./http1_table.ts`): watch streams and Kubernetes protobuf answers. */

import { testShard } from "./http1_table.ts";

testShard("watch_and_protobuf");
