/**
 * Reading the CSI mock driver's call log: its gRPC interceptor (`tools/mockdriver`, `logCall`, in
 * the format of the csi-test driver package's own) writes one klog line per call,
 * `I1121 23:10:05.563412  1518 main.go:245] gRPCCall: {"Method":...,"Request":...,
 * "Response":...,"Error":"...","ReceivedMs":...}`, with the request as Go's `encoding/json` renders
 * the CSI message (snake_case field names), written when the call ends; `ReceivedMs` is when it
 * arrived (a call held by a fault of the driver ends long after).
 *
 * @module
 */

/** One call the driver served. */
export interface DriverCall {
  /**
   * When the driver received the call (ms since the epoch): its `ReceivedMs`, or for a line
   * without it the line's own time.
   */
  time: number;
  /** When the call ended: the log line's time (ms since the epoch, local time zone, this year). */
  completed: number;
  /** Full gRPC method, e.g. `/csi.v1.Controller/ControllerPublishVolume`. */
  method: string;
  request: Record<string, unknown>;
  response: unknown;
  /** The error text; "" on success. */
  error: string;
}

const MARKER = "gRPCCall: ";
const HEADER = /^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})/;

function lineTime(line: string, year: number): number {
  const m = HEADER.exec(line);
  if (m === null) return Number.NaN;
  const [, mon, day, h, min, s, us] = m.map(Number) as number[];
  return new Date(year, mon! - 1, day!, h!, min!, s!, Math.floor(us! / 1000)).getTime();
}

/**
 * Every call in a log text, in the order the driver received them. Lines that are not call lines
 * are skipped.
 */
export function parseDriverCalls(text: string, year = new Date().getFullYear()): DriverCall[] {
  const calls: DriverCall[] = [];
  for (const line of text.split("\n")) {
    const at = line.indexOf(MARKER);
    if (at < 0) continue;
    let entry: {
      Method?: string;
      Request?: unknown;
      Response?: unknown;
      Error?: string;
      ReceivedMs?: number;
    };
    try {
      entry = JSON.parse(line.slice(at + MARKER.length));
    } catch (err) {
      throw new Error(`unreadable driver call line: ${line}`, { cause: err });
    }
    const completed = lineTime(line, year);
    calls.push({
      time: typeof entry.ReceivedMs === "number" ? entry.ReceivedMs : completed,
      completed,
      method: entry.Method ?? "",
      request: (entry.Request ?? {}) as Record<string, unknown>,
      response: entry.Response,
      error: entry.Error ?? "",
    });
  }
  // Stable: calls that arrived in the same millisecond keep the order they ended in.
  return calls.sort((a, b) => a.time - b.time);
}

/** The method names of the calls that concern the attacher. */
export const PUBLISH = "/csi.v1.Controller/ControllerPublishVolume";
/** ControllerUnpublishVolume's full method name. */
export const UNPUBLISH = "/csi.v1.Controller/ControllerUnpublishVolume";

/** Successful calls of `method` per `volume_id`. */
export function countByVolume(
  calls: readonly DriverCall[],
  method: string,
  opts: { successOnly?: boolean; since?: number } = {},
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const call of calls) {
    if (call.method !== method) continue;
    if (opts.successOnly !== false && call.error !== "") continue;
    if (opts.since !== undefined && !(call.time >= opts.since)) continue;
    const id = String(call.request.volume_id ?? "");
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}
