/**
 * When an attacher's caches synced, read from its klog text log.
 *
 * - Ours says `"Caches are synced" controller="csi-attacher"` at V(0) once its VolumeAttachment
 *   and PersistentVolume caches have synced (as client-go's `WaitForNamedCacheSync`).
 * - The Go sidecar waits with the plain `cache.WaitForCacheSync`, which logs nothing; each of its
 *   reflectors says `"Caches populated" type="*v1.VolumeAttachment"` at V(2) once its list is
 *   in the store (client-go `tools/cache/reflector.go`, `ListAndWatchWithContext`). Its caches
 *   have synced when both the VolumeAttachment and the PersistentVolume reflector have said so
 *   (`WaitForCacheSync` polls every 100 ms, so it notices up to 100 ms later).
 *
 * @module
 */

/** The klog header's time of `line` (`Lmmdd hh:mm:ss.uuuuuu ...`) in epoch ms, local time. */
export function klogTimeMs(line: string, year: number): number | undefined {
  const m = /^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) /.exec(line);
  if (m === null) return undefined;
  const [month, day, h, min, s, micros] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return new Date(year, month - 1, day, h, min, s).getTime() + micros / 1000;
}

/** The resources whose caches the attacher waits for, by the reflectors' `type`. */
const WAITED_TYPES = ['type="*v1.VolumeAttachment"', 'type="*v1.PersistentVolume"'];

/**
 * The time (epoch ms) the caches synced per the log `lines`, counting only lines at or after
 * `fromMs`; undefined when the log does not say so (yet).
 */
export function cachesSyncedAt(
  lines: readonly string[],
  options: { year: number; fromMs?: number },
): number | undefined {
  const from = options.fromMs ?? -Infinity;
  const populated = new Map<string, number>();
  for (const line of lines) {
    const at = klogTimeMs(line, options.year);
    if (at === undefined || at < from) continue;
    if (line.includes('"Caches are synced"')) return at;
    if (!line.includes('"Caches populated"')) continue;
    const type = WAITED_TYPES.find((t) => line.includes(t));
    if (type !== undefined && !populated.has(type)) populated.set(type, at);
    if (populated.size === WAITED_TYPES.length) return Math.max(...populated.values());
  }
  return undefined;
}
