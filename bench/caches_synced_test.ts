import assert from "node:assert/strict";
import { cachesSyncedAt, klogTimeMs } from "./caches_synced.ts";

const YEAR = 2026;

Deno.test("klogTimeMs reads the header's local time with microseconds", () => {
  assert.equal(
    klogTimeMs('I1128 07:40:01.123456   4242 controller.go:12] "Caches are synced"', YEAR),
    new Date(2026, 10, 28, 7, 40, 1).getTime() + 123.456,
  );
  assert.equal(klogTimeMs("# deno run main.js", YEAR), undefined);
  assert.equal(klogTimeMs("I1128 07:40:01 no micros", YEAR), undefined);
});

Deno.test("cachesSyncedAt: our V(0) line", () => {
  const lines = [
    'I1128 07:40:00.000000       1 leaderelection.go:1] "Successfully acquired lease"',
    'I1128 07:40:02.500000       1 controller.ts:1] "Caches are synced" controller="csi-attacher"',
  ];
  assert.equal(
    cachesSyncedAt(lines, { year: YEAR }),
    new Date(2026, 10, 28, 7, 40, 2).getTime() + 500,
  );
});

Deno.test("cachesSyncedAt: the Go sidecar's reflectors, the later of VA and PV", () => {
  const lines = [
    'I1128 07:40:01.000000 9 reflector.go:446] "Caches populated" type="*v1.CSINode" reflector="f"',
    'I1128 07:40:03.000000 9 reflector.go:446] "Caches populated" type="*v1.PersistentVolume" ' +
    'reflector="k8s.io/client-go/informers/factory.go:160"',
  ];
  // Only the PV cache yet: not synced.
  assert.equal(cachesSyncedAt(lines, { year: YEAR }), undefined);
  lines.push(
    'I1128 07:40:04.250000 9 reflector.go:446] "Caches populated" type="*v1.VolumeAttachment" ' +
      'reflector="k8s.io/client-go/informers/factory.go:160"',
  );
  assert.equal(
    cachesSyncedAt(lines, { year: YEAR }),
    new Date(2026, 10, 28, 7, 40, 4).getTime() + 250,
  );
});

Deno.test("cachesSyncedAt ignores lines before fromMs (a relist's, another term's)", () => {
  const lines = [
    'I1128 07:40:00.000000 1 c.ts:1] "Caches are synced" controller="csi-attacher"',
    'I1128 07:40:09.000000 1 c.ts:1] "Caches are synced" controller="csi-attacher"',
  ];
  assert.equal(
    cachesSyncedAt(lines, { year: YEAR, fromMs: new Date(2026, 10, 28, 7, 40, 5).getTime() }),
    new Date(2026, 10, 28, 7, 40, 9).getTime(),
  );
});
