import assert from "node:assert/strict";
import { decodeMessage, encodeMessage, ProtoWireError } from "../wire/grpc/protowire.ts";
import { messageSchema } from "./schema.ts";
import { concatBytes } from "../bytes.ts";
import { decodeListVolumesAnswer } from "./list_volumes_answer.ts";

const RESPONSE = messageSchema("csi.v1.ListVolumesResponse");
const ENTRY = messageSchema("csi.v1.ListVolumesResponse.Entry");

/** Bytes of the messages one after the other: protobuf reads that as one merged message. */
function concat(...parts: Uint8Array[]): Uint8Array {
  return concatBytes(parts);
}

/** `entries` (field 1) of a ListVolumesResponse holding `entry`'s bytes as they are. */
function entryField(entry: Uint8Array): Uint8Array {
  assert.ok(entry.length < 128);
  return concat(new Uint8Array([0x0a, entry.length]), entry);
}

/** What the reconciler reads, by the general decoder: the reference. */
function reference(bytes: Uint8Array) {
  const res = decodeMessage(RESPONSE, bytes) as {
    entries: {
      volume: { volumeId: string } | null;
      status: { publishedNodeIds: string[] } | null;
    }[];
    nextToken: string;
  };
  return {
    entries: res.entries.filter((e) => e.volume && e.status).map((e) => ({
      volumeId: e.volume!.volumeId,
      publishedNodeIds: e.status!.publishedNodeIds,
    })),
    nextToken: res.nextToken,
  };
}

Deno.test("decodeListVolumesAnswer() reads what the general decoder reads, skipping the rest", () => {
  const bytes = concat(
    encodeMessage(RESPONSE, {
      entries: [
        {
          volume: {
            volumeId: "vol-1",
            capacityBytes: "1073741824",
            volumeContext: { pool: "fast" },
            accessibleTopology: [{ segments: { zone: "z1" } }],
          },
          status: { publishedNodeIds: ["node-1", "node-2"], volumeCondition: { abnormal: true } },
        },
        { volume: { volumeId: "no-status" } },
        { status: { publishedNodeIds: ["no-volume"] } },
        { volume: { volumeId: "vol-2" }, status: {} },
        { volume: {}, status: { publishedNodeIds: ["node-1"] } },
      ],
      nextToken: "7",
    }),
    // A singular message field that occurs again is merged: the volume ID is the last one, the
    // node IDs of both statuses count.
    entryField(concat(
      encodeMessage(ENTRY, { volume: { volumeId: "old" }, status: { publishedNodeIds: ["a"] } }),
      encodeMessage(ENTRY, { volume: { volumeId: "vol-3" }, status: { publishedNodeIds: ["b"] } }),
    )),
    // A field outside the projection with every wire type is skipped.
    new Uint8Array([0x18, 0x01, 0x21, 1, 2, 3, 4, 5, 6, 7, 8, 0x2d, 1, 2, 3, 4]),
  );
  const page = decodeListVolumesAnswer(bytes);
  assert.deepEqual(page, reference(bytes));
  assert.deepEqual(page.entries.map((e) => e.volumeId), ["vol-1", "vol-2", "", "vol-3"]);
  assert.deepEqual(page.entries[3]!.publishedNodeIds, ["a", "b"]);
  assert.deepEqual(decodeListVolumesAnswer(new Uint8Array(0)), { entries: [], nextToken: "" });
});

Deno.test("decodeListVolumesAnswer() shares one frozen list per distinct set of nodes", () => {
  const page = decodeListVolumesAnswer(encodeMessage(RESPONSE, {
    entries: [
      { volume: { volumeId: "v1" }, status: { publishedNodeIds: ["n1"] } },
      { volume: { volumeId: "v2" }, status: { publishedNodeIds: ["n1"] } },
      { volume: { volumeId: "v3" }, status: { publishedNodeIds: ["n1", "n2"] } },
      { volume: { volumeId: "v4" }, status: { publishedNodeIds: ["n1", "n2"] } },
      { volume: { volumeId: "v5" }, status: { publishedNodeIds: ["n2"] } },
      { volume: { volumeId: "v6" }, status: {} },
    ],
  }));
  const lists = page.entries.map((e) => e.publishedNodeIds);
  assert.equal(lists[0], lists[1]);
  assert.equal(lists[2], lists[3]);
  assert.notEqual(lists[0], lists[4]);
  assert.deepEqual(lists.map((l) => [...l]), [["n1"], ["n1"], ["n1", "n2"], ["n1", "n2"], [
    "n2",
  ], []]);
  assert.ok(lists.every((l) => Object.isFrozen(l)));
});

Deno.test("decodeListVolumesAnswer() refuses a known field of the wrong wire type and bad bytes", () => {
  // entries (1) as a varint.
  assert.throws(
    () => decodeListVolumesAnswer(new Uint8Array([0x08, 0x01])),
    (err) =>
      err instanceof ProtoWireError &&
      err.message === "csi.v1.ListVolumesResponse.entries: wire type 0, expected 2",
  );
  // An entry whose volume's volume_id (2) is a varint.
  assert.throws(
    () => decodeListVolumesAnswer(entryField(new Uint8Array([0x0a, 0x02, 0x10, 0x01]))),
    /csi\.v1\.Volume\.volumeId: wire type 0, expected 2/,
  );
  // The general decoder refuses the same bytes.
  assert.throws(() => decodeMessage(RESPONSE, new Uint8Array([0x08, 0x01])), ProtoWireError);
  // Truncated: a length beyond the end.
  assert.throws(() => decodeListVolumesAnswer(new Uint8Array([0x0a, 0x05, 0x0a])), ProtoWireError);
  // Field number 0.
  assert.throws(() => decodeListVolumesAnswer(new Uint8Array([0x02, 0x00])), /field number 0/);
});
