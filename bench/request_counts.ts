/**
 * API request counts as the benchmark reports them, whichever server recorded the requests.
 *
 * @module
 */

/** Requests counted by kind. */
export interface RequestCounts {
  /** By `<verb> <resource>[/<subresource>]`, e.g. `patch volumeattachments/status`. */
  byKey: Record<string, number>;
  /**
   * By `<METHOD> <content type>` of requests with a body, e.g. `PATCH application/merge-patch+json`
   * (empty when the server does not record content types).
   */
  contentTypes: Record<string, number>;
  /** Distinct `Accept` headers with their counts (empty when not recorded). */
  accept: Record<string, number>;
  /** Distinct `User-Agent` headers with their counts. */
  userAgents: Record<string, number>;
  /**
   * By `<User-Agent up to its first "/"> <media type of the answer>` (the in-memory server only;
   * empty when not recorded).
   */
  responseTypes: Record<string, number>;
}

/** No requests. */
export function emptyCounts(): RequestCounts {
  return { byKey: {}, contentTypes: {}, accept: {}, userAgents: {}, responseTypes: {} };
}

/** Adds one to `map[key]`. */
export function bump(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}

function add(into: Record<string, number>, from: Readonly<Record<string, number>>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

/** The sum of two counts (new object; the inputs are not changed). */
export function mergeCounts(a: RequestCounts, b: RequestCounts): RequestCounts {
  const out = emptyCounts();
  for (const c of [a, b]) {
    add(out.byKey, c.byKey);
    add(out.contentTypes, c.contentTypes);
    add(out.accept, c.accept);
    add(out.userAgents, c.userAgents);
    add(out.responseTypes, c.responseTypes ?? {});
  }
  return out;
}

/** `<verb> <resource>[/<subresource>]`. */
export function requestKey(verb: string, resource: string, subresource: string): string {
  return `${verb} ${resource}${subresource === "" ? "" : `/${subresource}`}`;
}
