/**
 * Deliberately broken attachers, to prove that the chaos checks catch the bugs they are meant to
 * catch: each sabotage wraps the API or CSI client of an attacher instance so that it behaves
 * like a handler with one specific bug.
 *
 * @module
 */

import type { CsiClient } from "../../lib/csi/api.ts";
import type { KubeApi } from "../../lib/kube/api.ts";
import type { Logger } from "../../lib/observe/logger.ts";

/** The bugs a sabotaged attacher has. */
export type Sabotage =
  /** Its finalizer patches on VolumeAttachments are lost on the way, unnoticed. */
  | "storeNoFinalizer"
  /** ControllerUnpublishVolume reports success without reaching the driver. */
  | "fakeUnpublish"
  /** ControllerPublishVolume requests are logged with their secrets. */
  | "logSecrets"
  /** No lease fence: a replica resumed after a pause acts until it learns it lost the Lease. */
  | "noFence";

/** The clients of one instance, broken as `sabotage` says. */
export function sabotageClients(
  sabotage: Sabotage,
  clients: { kube: KubeApi; csi: CsiClient; log: Logger },
): { kube: KubeApi; csi: CsiClient } {
  const { kube, csi, log } = clients;
  switch (sabotage) {
    case "storeNoFinalizer":
      return {
        csi,
        kube: {
          list: (res, opts) => kube.list(res, opts),
          watch: (res, opts) => kube.watch(res, opts),
          get: (res, name, opts) => kube.get(res, name, opts),
          create: (res, obj, opts) => kube.create(res, obj, opts),
          update: (res, obj, opts) => kube.update(res, obj, opts),
          delete: (res, name, opts) => kube.delete(res, name, opts),
          patch: (res, name, patch, opts) => {
            const body = patch.body as { metadata?: { finalizers?: unknown } };
            if (
              res.plural === "volumeattachments" && patch.type === "merge" &&
              body.metadata?.finalizers !== undefined
            ) {
              const { finalizers: _dropped, ...metadata } = body.metadata;
              return kube.patch(res, name, { type: "merge", body: { ...body, metadata } }, opts);
            }
            return kube.patch(res, name, patch, opts);
          },
        },
      };
    case "fakeUnpublish":
      return {
        kube,
        csi: wrapCsi(csi, { controllerUnpublishVolume: () => Promise.resolve() }),
      };
    case "noFence":
      return { kube, csi }; // the instance leaves the fence out (attacher_instance.ts)
    case "logSecrets":
      return {
        kube,
        csi: wrapCsi(csi, {
          controllerPublishVolume: (req, opts) => {
            log.v(5).info("GRPC request", { request: req });
            return csi.controllerPublishVolume(req, opts);
          },
        }),
      };
  }
}

/** `inner` with some methods replaced. */
function wrapCsi(inner: CsiClient, overrides: Partial<CsiClient>): CsiClient {
  return {
    probe: (o) => inner.probe(o),
    getPluginInfo: (o) => inner.getPluginInfo(o),
    getPluginCapabilities: (o) => inner.getPluginCapabilities(o),
    controllerGetCapabilities: (o) => inner.controllerGetCapabilities(o),
    controllerPublishVolume: (r, o) => inner.controllerPublishVolume(r, o),
    controllerUnpublishVolume: (r, o) => inner.controllerUnpublishVolume(r, o),
    listVolumes: (r, o) => inner.listVolumes(r, o),
    close: () => inner.close(),
    ...overrides,
  };
}
