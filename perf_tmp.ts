import { loadKubeProtos } from "./testkit/kube_protos.ts";
const k = loadKubeProtos()!;
const va = { apiVersion: "storage.k8s.io/v1", kind: "VolumeAttachment", metadata: { name: "csi-0123456789abcdef0123456789abcdef", uid: "1234-5678", creationTimestamp: "2026-11-18T11:06:40Z", finalizers: ["external-attacher/csi-example-com"], managedFields: [{manager: "x", operation: "Update", apiVersion: "storage.k8s.io/v1", time: "2026-11-18T11:06:40Z", fieldsType: "FieldsV1", fieldsV1: {"f:spec": {"f:attacher": {}, "f:nodeName": {}}}}], resourceVersion: "5" },
  spec: { attacher: "csi.x", nodeName: "n1", source: { persistentVolumeName: "pv1" } }, status: { attached: true, attachmentMetadata: {k: "v"} } };
for (let i = 0; i < 2000; i++) k.encodeWatchEvent("ADDED", va);
let t = performance.now();
for (let i = 0; i < 20000; i++) k.encodeWatchEvent("ADDED", va);
console.log("us/event", (performance.now() - t) / 20000 * 1000);
console.log(JSON.stringify(k.decodeWatchEvent(k.encodeWatchEvent("ADDED", va))) === JSON.stringify({type:"ADDED", object: va}));
