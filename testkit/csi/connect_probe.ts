/**
 * `deno run testkit/csi/connect_probe.ts <address> <timeoutMs>`: runs {@link connect} once with
 * the JSON logger on stdout, then prints `{"final": "<error text>"}` (or `{"final": null}` when
 * it connected). Tests run it as another user (`setpriv`) to meet a socket the process may not
 * open, which a test running as root cannot meet in-process.
 *
 * @module
 */

import { connect } from "../../lib/csi/connection.ts";
import { realClock } from "../../lib/clock.ts";
import { createLogger } from "../../lib/observe/log.ts";
import { errorText } from "../../lib/errors.ts";

const [address, timeout] = Deno.args;
if (address === undefined) throw new Error("usage: connect_probe.ts <address> [timeoutMs]");
const log = createLogger({
  verbosity: 0,
  format: "json",
  write: (line) => console.log(line),
});
try {
  const client = await connect(address, {
    log,
    clock: realClock,
    timeoutMs: Number(timeout ?? 1000),
    reconnectBackoffMs: 100,
    logIntervalMs: 10_000,
  });
  client.close();
  console.log(JSON.stringify({ final: null }));
} catch (err) {
  console.log(JSON.stringify({ final: errorText(err) }));
}
