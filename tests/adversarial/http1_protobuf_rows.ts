/**
 * The rows of the hostile HTTP/1.1 server table (`./http1_table.ts`) about Kubernetes protobuf:
 * answers to a get whose message is malformed field by field (truncated varints, lengths past the
 * end, varints of 11 bytes, wrong and invalid wire types, groups nested 50 000 deep, 900 KiB of
 * unknown fields, JSON under a protobuf `Content-Type`), and protobuf watches whose frames are
 * abused (a length of 4 GiB or 1 byte over client-go's 16 MiB, 15 MiB of garbage, a switch to
 * JSON lines, an object in JSON inside a frame, a body ending inside a frame, empty frames
 * without end). Each must end in its named error with a bounded heap, and the client goes on.
 *
 * @module
 */

import type { Row } from "./http1_table.ts";
import { ok } from "../../testkit/http1/raw_server.ts";
import {
  envelope,
  lengthFrame,
  ProtoWriter,
  writeObject,
  writeWatchEvent,
} from "../../testkit/kube_protobuf_writer.ts";
import { expiredStatus, volumeAttachment } from "../../testkit/kube_protobuf_fixtures.ts";

const MiB = 1024 * 1024;
const PV_JSON = JSON.stringify({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: { name: "pv1", resourceVersion: "7" },
  spec: {},
});
const ADDED = `{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"8"}}}\n`;

/** Writes `data` and closes. */
function send(data: string | Uint8Array): Row["script"] {
  return async (ex) => {
    await ex.write(data);
    return "close";
  };
}

/** Writes `head`, then `piece` again and again until the client leaves. */
function endless(head: string | Uint8Array, piece: string | Uint8Array): Row["script"] {
  return async (ex) => {
    await ex.write(head);
    await ex.flood(piece);
    return "close";
  };
}

const PB = "application/vnd.kubernetes.protobuf";
const PB_WATCH_HEAD = `HTTP/1.1 200 OK\r\nContent-Type: ${PB};stream=watch\r\n` +
  "Connection: close\r\n\r\n";
const PB_ADDED = lengthFrame(writeWatchEvent("ADDED", writeObject(volumeAttachment())));

/** A protobuf PV answer whose message is `raw`, with a Content-Length. */
function pbAnswer(raw: Uint8Array): Uint8Array {
  const body = envelope("v1", "PersistentVolume", raw);
  const head = `HTTP/1.1 200 OK\r\nContent-Type: ${PB}\r\nContent-Length: ${body.length}\r\n\r\n`;
  return join(new TextEncoder().encode(head), body);
}

function join(...parts: (string | Uint8Array)[]): Uint8Array {
  const bytes = parts.map((p) => typeof p === "string" ? new TextEncoder().encode(p) : p);
  const out = new Uint8Array(bytes.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of bytes) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}

/** A 4-byte big-endian frame length. */
function frameLength(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

/** The rows. */
export const PROTOBUF_ROWS: Row[] = [
  // Kubernetes protobuf answers and watches.
  ...([
    ["a truncated varint", Uint8Array.of(0x98, 0x06, 0x80)],
    ["a length past the end", Uint8Array.of(0x0a, 0x7f, 0x0a)],
    ["an 11-byte varint", Uint8Array.of(0x78, ...new Array(10).fill(0xff), 1)],
    ["metadata with wire type 0", Uint8Array.of(0x08, 0x01)],
    ["wire type 7", Uint8Array.of(0x7f)],
    [
      "groups nested 50 000 deep",
      join(...new Array(50_000).fill(Uint8Array.of(0x9b, 0x06)), Uint8Array.of(0x9c, 0x06)),
    ],
  ] as const).map(([what, raw]): Row => ({
    name: `protobuf get: ${what}`,
    call: "get",
    script: send(pbAnswer(raw)),
    expect: { reason: "InvalidResponse" },
  })),
  {
    name: "protobuf get: 900 KiB of unknown fields around the metadata",
    call: "get",
    script: send(pbAnswer(join(
      new ProtoWriter().bytes(77, new Uint8Array(900 * 1024)).finish(),
      new ProtoWriter().bytes(1, new ProtoWriter().string(1, "pv1").finish()).finish(),
    ))),
    expect: { ok: true },
  },
  {
    name: "protobuf get: the answer's body is JSON",
    call: "get",
    script: send(ok(PV_JSON, [`Content-Type: ${PB}`])),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: a frame length of 4 GiB after an event",
    call: "watch",
    script: send(join(PB_WATCH_HEAD, PB_ADDED, frameLength(0xffffffff), "x".repeat(100))),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: a frame 1 byte over 16 MiB",
    call: "watch",
    script: send(join(PB_WATCH_HEAD, frameLength(16 * MiB + 1))),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: a frame of 15 MiB of garbage",
    call: "watch",
    script: endless(join(PB_WATCH_HEAD, frameLength(15 * MiB)), "x".repeat(64 * 1024)),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: the stream switches to JSON lines",
    call: "watch",
    script: send(join(PB_WATCH_HEAD, PB_ADDED, ADDED)),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: an object in JSON inside a frame",
    call: "watch",
    script: send(join(
      PB_WATCH_HEAD,
      lengthFrame(writeWatchEvent("ADDED", new TextEncoder().encode(ADDED))),
    )),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: the body ends inside a frame",
    call: "watch",
    script: send(join(PB_WATCH_HEAD, PB_ADDED, PB_ADDED.subarray(0, 30))),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: empty frames without end",
    call: "watch",
    script: endless(PB_WATCH_HEAD, frameLength(0)),
    expect: { reason: "InvalidResponse" },
  },
  {
    name: "protobuf watch: events and an ERROR event",
    call: "watch",
    script: send(join(
      PB_WATCH_HEAD,
      PB_ADDED,
      lengthFrame(writeWatchEvent("ERROR", writeObject(expiredStatus()))),
    )),
    expect: { ok: true, events: ["ADDED", "ERROR"] },
  },
];
