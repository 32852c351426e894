/**
 * The Kubernetes protobuf decoder against an independent encoder: protobufjs loading the upstream
 * `generated.proto` files of Kubernetes 1.37 and 1.35 (`testkit/kube_protos.ts`). Every fixture,
 * managed fields included, encoded by protobufjs, must decode with ours to its JSON form without
 * `managedFields`. Ignored with the reason when the files are absent (see `./tables_test.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { decodeObject, decodeWatchEvent } from "./decode.ts";
import {
  KUBE_PROTO_VERSIONS,
  kubeProtosMissing,
  kubeProtosRequired,
  loadKubeProtos,
  withoutZeroValues,
} from "../../../testkit/kube_protos.ts";
import { writeObject } from "../../../testkit/kube_protobuf_writer.ts";
import {
  azureFilePersistentVolume,
  csiNode,
  expiredStatus,
  failingVolumeAttachment,
  lease,
  notFoundStatus,
  persistentVolume,
  volumeAttachment,
  withoutManagedFields,
} from "../../../testkit/kube_protobuf_fixtures.ts";

const FIXTURES = [
  volumeAttachment,
  failingVolumeAttachment,
  persistentVolume,
  azureFilePersistentVolume,
  csiNode,
  lease,
  notFoundStatus,
  expiredStatus,
];

for (const version of KUBE_PROTO_VERSIONS) {
  const missing = kubeProtosMissing(version);
  const ignore = missing !== undefined && !kubeProtosRequired();
  Deno.test({
    name: `decodeObject reads protobufjs's encoding of k8s.io ${version}` +
      (ignore ? ` (ignored: ${missing})` : ""),
    ignore,
    fn() {
      const kp = loadKubeProtos(version)!;
      for (const make of FIXTURES) {
        const json = make();
        const name = `${json.kind} ${(json.metadata as { name?: string }).name ?? ""}`;
        // CSINode.status is new in v0.37; the decoder gives its `{}` whatever the release.
        const sent = structuredClone(json);
        if (json.kind === "CSINode" && version < "v0.37") delete sent.status;
        assert.deepStrictEqual(decodeObject(kp.encode(sent)), withoutManagedFields(json), name);
        const event = decodeWatchEvent(kp.encodeWatchEvent("MODIFIED", sent));
        assert.deepStrictEqual(event, { type: "MODIFIED", object: withoutManagedFields(json) });
        // The test kit's writer agrees with protobufjs on the bytes' meaning.
        assert.deepStrictEqual(
          withoutZeroValues(kp.decode(writeObject(sent))),
          withoutZeroValues(withoutManagedFields(sent)),
          `${name}: testkit writer`,
        );
      }
      // A list as protobufjs encodes it.
      const list = {
        kind: "VolumeAttachmentList",
        apiVersion: "storage.k8s.io/v1",
        metadata: { resourceVersion: "10" },
        items: [volumeAttachment("a"), failingVolumeAttachment()].map((va) => {
          const { kind: _k, apiVersion: _a, ...rest } = va;
          return rest;
        }),
      };
      assert.deepStrictEqual(decodeObject(kp.encode(list)), {
        ...list,
        items: list.items.map(withoutManagedFields),
      });
    },
  });
}
