/**
 * Which replica made each ControllerPublishVolume and ControllerUnpublishVolume call the driver
 * served. Every replica logs "GRPC call" with the method and the request at verbosity 5 before it
 * sends the request (ours, `lib/csi/grpc_log.ts`, and the Go csi-attacher through csi-lib-utils'
 * `LogGRPC`, `connection/connection.go`); the driver logs the call once it has served it
 * (`driver_log.ts`). The driver cannot tell callers apart on its one socket, so each call it
 * served is matched to the latest logged call of the same method, volume and node, logged no
 * later than it was served, that no earlier served call took.
 *
 * @module
 */

import { type DriverCall, PUBLISH, UNPUBLISH } from "./driver_log.ts";
import { parseAttacherLog } from "./kit.ts";
import { fieldsOf } from "./publish_analysis.ts";

/** The calls that change what is attached where. */
export const ACTING_METHODS: readonly string[] = [PUBLISH, UNPUBLISH];

/** One call a replica logged. */
export interface LoggedCall {
  replica: string;
  /** When the replica logged it, just before sending (ms since the epoch). */
  time: number;
  method: string;
  volumeId: string;
  nodeId: string;
}

/** A call the driver served, with the replica that logged it (undefined: none did). */
export interface AttributedCall {
  served: DriverCall;
  logged: LoggedCall | undefined;
}

/** Our log has ms in klog's µs field; the driver's is finer: this much skew is allowed. */
const LOG_SKEW_MS = 2;

/** The acting calls (`methods`) in one replica's log, oldest first. */
export function loggedCalls(
  replica: string,
  log: string,
  methods: readonly string[] = ACTING_METHODS,
): LoggedCall[] {
  const out: LoggedCall[] = [];
  for (const line of parseAttacherLog(log)) {
    if (line.msg !== "GRPC call") continue;
    const fields = fieldsOf(line.rest);
    const method = fields.method ?? "";
    if (!methods.includes(method)) continue;
    // Ours writes protobuf's JSON names (volumeId), the Go sidecar the proto field names.
    let request: { volume_id?: string; node_id?: string; volumeId?: string; nodeId?: string } = {};
    try {
      request = JSON.parse(fields.request ?? "{}");
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
    }
    out.push({
      replica,
      time: line.time,
      method,
      volumeId: String(request.volume_id ?? request.volumeId ?? ""),
      nodeId: String(request.node_id ?? request.nodeId ?? ""),
    });
  }
  return out;
}

/**
 * The acting calls (`methods`) in one replica's log that it logged but did not send: its lease
 * fence refused them at the socket ("GRPC error" with "request not sent", `lib/csi/client.ts`).
 * Their times; which of several concurrent calls of one method it was, the log does not say.
 */
export function unsentCalls(log: string, methods: readonly string[] = ACTING_METHODS): number[] {
  return parseAttacherLog(log).filter((line) => {
    if (line.msg !== "GRPC error") return false;
    const fields = fieldsOf(line.rest);
    return methods.includes(fields.method ?? "") && /request not sent/.test(fields.err ?? "");
  }).map((line) => line.time);
}

/** Each acting call the driver served (successful or not), attributed to the replica that made it. */
export function attributeCalls(
  served: readonly DriverCall[],
  logged: readonly LoggedCall[],
): AttributedCall[] {
  const key = (method: string, volume: string, node: string) =>
    `${method}\u0000${volume}\u0000${node}`;
  const pending = new Map<string, LoggedCall[]>();
  for (const c of [...logged].sort((a, b) => a.time - b.time)) {
    const k = key(c.method, c.volumeId, c.nodeId);
    pending.set(k, [...(pending.get(k) ?? []), c]);
  }
  const out: AttributedCall[] = [];
  for (const call of served) {
    if (!ACTING_METHODS.includes(call.method)) continue;
    const list = pending.get(
      key(call.method, String(call.request.volume_id ?? ""), String(call.request.node_id ?? "")),
    ) ?? [];
    let best = -1;
    for (let i = 0; i < list.length; i++) {
      if (list[i]!.time <= call.time + LOG_SKEW_MS) best = i;
      else break;
    }
    const logged = best >= 0 ? list.splice(best, 1)[0] : undefined;
    out.push({ served: call, logged });
  }
  return out;
}
