/**
 * `main.ts` behind an HTTP proxy named by the environment, as a sidecar inherits `HTTP_PROXY` /
 * `NO_PROXY` from its pod spec: every request to the API server goes through the proxy's tunnel.
 */

import assert from "node:assert/strict";
import { VOLUME_ATTACHMENTS } from "../../lib/kube/api.ts";
import type { VolumeAttachment } from "../../lib/kube/types.ts";
import { MemoryApiServer } from "../../testkit/apiserver/server.ts";
import { ConnectProxy } from "../../testkit/connect_proxy.ts";
import { spawnMain } from "../../testkit/harness/main_process.ts";

Deno.test("main.ts reaches the API server through HTTP_PROXY when NO_PROXY does not name it", async () => {
  await using server = await MemoryApiServer.start();
  const port = new URL(server.url).port;
  // kube.test is a name only the proxy resolves: reaching the server proves the tunnel.
  await using proxy = ConnectProxy.start({ route: () => Number(port) });
  const dir = await Deno.makeTempDir({ prefix: "attacher-proxy-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await Deno.writeTextFile(
    kubeconfig,
    server.kubeconfig().replace(/server: http:\/\/[^\n]*/, `server: http://kube.test:${port}`),
  );
  server.create(VOLUME_ATTACHMENTS, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "va1" },
    spec: { attacher: "csi/dummy", nodeName: "node1", source: { persistentVolumeName: "pv1" } },
  });
  const main = spawnMain(["--dummy", `--kubeconfig=${kubeconfig}`], {
    http_proxy: proxy.url,
    NO_PROXY: "other.test,10.0.0.0/8",
  });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not attached; log:\n${main.log}`)), 60_000);
      const check = () => {
        const va = server.find<VolumeAttachment>(VOLUME_ATTACHMENTS, "va1");
        if (va?.status?.attached !== true) return;
        clearTimeout(timer);
        unsubscribe();
        resolve();
      };
      const unsubscribe = server.onEvent(check);
      check();
    });
  } finally {
    main.child.kill("SIGTERM");
    await main.child.status;
    await main.drained;
    await Deno.remove(dir, { recursive: true });
  }
  assert.ok(proxy.connects.length >= 1, main.log);
  assert.ok(proxy.connects.every((c) => c.authority === `kube.test:${port}`));
});
