/**
 * The address forms of `--csi-address` as csi-lib-utils accepts them.
 *
 * @module
 */

/** Where to connect: a unix socket path or a TCP host and port. */
export type ChannelAddress =
  | { transport: "unix"; path: string }
  | { transport: "tcp"; hostname: string; port: number };

/**
 * Parses `--csi-address` as csi-lib-utils accepts it: an absolute path, `unix:///path`,
 * `unix:/path` or `host:port` (`[v6]:port`).
 *
 * @throws {Error} for anything else.
 */
export function parseAddress(address: string): ChannelAddress {
  if (address.startsWith("/")) return { transport: "unix", path: address };
  if (address.startsWith("unix://")) {
    const path = address.slice("unix://".length);
    if (path.startsWith("/")) return { transport: "unix", path };
  } else if (address.startsWith("unix:")) {
    const path = address.slice("unix:".length);
    if (path !== "") return { transport: "unix", path };
  } else {
    const m = /^(?:\[([^\]]+)\]|([^:/]*)):(\d{1,5})$/.exec(address);
    if (m !== null && Number(m[3]) <= 65535) {
      const hostname = m[1] ?? m[2] ?? "";
      return {
        transport: "tcp",
        hostname: hostname === "" ? "localhost" : hostname,
        port: Number(m[3]),
      };
    }
  }
  throw new Error(
    `invalid CSI address ${JSON.stringify(address)}: want a path, unix:// or host:port`,
  );
}
