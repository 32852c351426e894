/** The hostile HTTP/1.1 server table (`./http1_table.ts`) through an HTTP proxy's CONNECT tunnel. */

import { runThroughProxy } from "./http1_table.ts";

Deno.test("hostile HTTP/1.1 servers behind an HTTP proxy's CONNECT tunnel: the same answers", () =>
  runThroughProxy());
