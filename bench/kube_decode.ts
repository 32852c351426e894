/**
 * Microbenchmark: one VolumeAttachment watch event as kube-apiserver sends it (with the two
 * `managedFields` entries every attached VA carries), decoded the way the client decodes it:
 * a JSON line (`TextDecoder` and `JSON.parse` with the event checks, `lib/kube/request/watch_stream.ts`
 * `decodeWatchEvent`) against a protobuf frame (`decodeProtobufWatchEvent`, the table-driven
 * decoder of `lib/wire/kubernetes/`). The protobuf bytes are protobufjs's encoding on the upstream
 * `.proto` files (`testkit/kube_protos.ts`), so the Go module cache must hold them.
 *
 * `deno run -A --v8-flags=--expose-gc bench/kube_decode.ts [--events=20000] [--rounds=7]`
 *
 * Prints bytes per event and the median time per event over the rounds (each round decodes
 * `--events` events, garbage collection included; a forced GC between rounds).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { decodeProtobufWatchEvent, decodeWatchEvent } from "../lib/kube/request/watch_stream.ts";
import { loadKubeProtos } from "../testkit/kube_protos.ts";
import { volumeAttachment } from "../testkit/kube_protobuf_fixtures.ts";

const CTX = { method: "GET", url: new URL("https://kube.invalid/apis/storage.k8s.io/v1/x") };

/** The median of `values`. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Microseconds per call of `fn` over `events` calls, median of `rounds`. */
function perEvent(events: number, rounds: number, fn: (i: number) => unknown): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  const times: number[] = [];
  let sink = 0;
  for (let r = 0; r < rounds + 1; r++) {
    gc?.();
    const start = performance.now();
    for (let i = 0; i < events; i++) if (fn(i) !== undefined) sink++;
    const us = (performance.now() - start) * 1000 / events;
    if (r > 0) times.push(us); // round 0 warms up
  }
  if (sink < 0) console.log(sink);
  return median(times);
}

if (import.meta.main) {
  const args = parseArgs({
    args: Deno.args,
    options: {
      events: { type: "string", default: "20000" },
      rounds: { type: "string", default: "7" },
    },
  });
  const events = Number(args.values.events);
  const rounds = Number(args.values.rounds);
  const kp = loadKubeProtos();
  if (kp === undefined) throw new Error("the upstream .proto files are not in the Go module cache");
  const va = volumeAttachment();
  // Distinct bytes per event, as a watch delivers them (no cached strings across events).
  const variants = 64;
  const jsonLines: Uint8Array[] = [];
  const frames: Uint8Array[] = [];
  const encoder = new TextEncoder();
  for (let v = 0; v < variants; v++) {
    const obj = structuredClone(va);
    (obj.metadata as Record<string, unknown>).resourceVersion = String(123456 + v);
    jsonLines.push(encoder.encode(JSON.stringify({ type: "MODIFIED", object: obj }) + "\n"));
    frames.push(kp.encodeWatchEvent("MODIFIED", obj));
  }
  const utf8 = new TextDecoder();
  const json = perEvent(events, rounds, (i) => {
    const line = jsonLines[i % variants]!;
    return decodeWatchEvent(utf8.decode(line.subarray(0, line.length - 1)).trim(), CTX);
  });
  const protobuf = perEvent(
    events,
    rounds,
    (i) => decodeProtobufWatchEvent(frames[i % variants]!, CTX),
  );
  console.log(
    `VolumeAttachment watch event: JSON ${jsonLines[0]!.length} bytes, protobuf ` +
      `${frames[0]!.length + 4} bytes (with its 4-byte length)`,
  );
  console.log(
    `decode per event, median of ${rounds} rounds of ${events}: JSON ${json.toFixed(2)} us, ` +
      `protobuf ${protobuf.toFixed(2)} us (${(protobuf / json).toFixed(2)}x)`,
  );
}
