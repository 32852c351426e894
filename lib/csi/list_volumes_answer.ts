/**
 * A ListVolumes answer (`csi.v1.ListVolumesResponse`) read straight from its bytes into the page
 * the reconciler uses: each entry's volume ID and published node IDs and the next token, nothing
 * else (capacity, context, content source, topology and condition are skipped as unknown fields
 * are).
 *
 * Why not {@link decodeMessage} with a projected schema: that builds the message tree first (an
 * object for each entry, its volume and its status, and a list of node IDs for each), and the
 * page is only read once all of it is built. A page of 25 000 entries stays reachable through
 * several young-generation collections while it is decoded, so it is promoted to the old
 * generation and stays there, as garbage, until the next full collection: 5–10 MB a page, 30–40
 * MB for a pass over 100 000 volumes, taken while the attach burst allocates too. Here the only
 * objects an entry leaves are its volume ID and one `{volumeId, publishedNodeIds}`; the node ID
 * lists are shared, frozen, one per distinct list in the answer (most volumes are published to
 * one node, and a node's ID is repeated by every volume on it).
 *
 * Read as `decodeMessage` reads it (protobuf's rules): a singular message field that occurs
 * again is merged (the last `volume_id` wins, `published_node_ids` append), an entry without
 * `volume` or without `status` is left out (as the Go attacher's reconciler skips it), and a
 * known field of the wrong wire type, like malformed bytes, is refused with a
 * {@link ProtoWireError}. Field numbers from the CSI spec's `csi.proto`: ListVolumesResponse
 * `entries` 1, `next_token` 2; Entry `volume` 1, `status` 2; Volume `volume_id` 2; VolumeStatus
 * `published_node_ids` 1.
 *
 * @module
 */

import { decodeText, ProtoWireError, visitFields, WIRE_TYPE_LEN } from "../wire/grpc/protowire.ts";
import type { ListedVolume, ListVolumesPage } from "./api.ts";

const NO_NODES: readonly string[] = Object.freeze([]);

function expectLength(message: string, field: string, wireType: number): void {
  if (wireType !== WIRE_TYPE_LEN) {
    throw new ProtoWireError(
      `csi.v1.${message}.${field}: wire type ${wireType}, expected ${WIRE_TYPE_LEN}`,
    );
  }
}

/**
 * The page a ListVolumes answer holds (see the module doc), without its size.
 *
 * @throws {ProtoWireError} on malformed bytes or a known field of the wrong wire type.
 */
export function decodeListVolumesAnswer(bytes: Uint8Array): Omit<ListVolumesPage, "bytes"> {
  const entries: ListedVolume[] = [];
  let nextToken = "";
  // Node ID lists of this answer, shared: a single ID by itself, longer lists by their JSON.
  const lists = new Map<string, readonly string[]>();
  // The entry being read. Its node IDs go to one scratch list, copied only for a list not seen
  // before: nothing read per entry outlives the entry but its volume ID and its record.
  let volumeId: string | undefined;
  let hasStatus = false;
  const nodeIds: string[] = [];
  const readVolume = (number: number, wireType: number, from: number, to: number) => {
    if (number !== 2) return;
    expectLength("Volume", "volumeId", wireType);
    volumeId = decodeText(bytes, from, to);
  };
  const readStatus = (number: number, wireType: number, from: number, to: number) => {
    if (number !== 1) return;
    expectLength("ListVolumesResponse.VolumeStatus", "publishedNodeIds", wireType);
    nodeIds.push(decodeText(bytes, from, to));
  };
  const readEntry = (number: number, wireType: number, from: number, to: number) => {
    if (number === 1) {
      expectLength("ListVolumesResponse.Entry", "volume", wireType);
      volumeId ??= "";
      visitFields(bytes, from, to, 2, readVolume);
    } else if (number === 2) {
      expectLength("ListVolumesResponse.Entry", "status", wireType);
      hasStatus = true;
      visitFields(bytes, from, to, 2, readStatus);
    }
  };
  const sharedNodeIds = (): readonly string[] => {
    if (nodeIds.length === 0) return NO_NODES;
    const key = nodeIds.length === 1 ? nodeIds[0]! : JSON.stringify(nodeIds);
    let list = lists.get(key);
    if (list === undefined) {
      list = Object.freeze(nodeIds.slice());
      lists.set(key, list);
    }
    return list;
  };
  visitFields(bytes, 0, bytes.length, 0, (number, wireType, from, to) => {
    if (number === 2) {
      expectLength("ListVolumesResponse", "nextToken", wireType);
      nextToken = decodeText(bytes, from, to);
      return;
    }
    if (number !== 1) return;
    expectLength("ListVolumesResponse", "entries", wireType);
    volumeId = undefined;
    hasStatus = false;
    nodeIds.length = 0;
    visitFields(bytes, from, to, 1, readEntry);
    if (volumeId === undefined || !hasStatus) return;
    entries.push({ volumeId, publishedNodeIds: sharedNodeIds() });
  });
  return { entries, nextToken };
}
