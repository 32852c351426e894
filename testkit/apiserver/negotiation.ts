/**
 * The media type of a response, chosen from `Accept` as kube-apiserver chooses it
 * (`apiserver/pkg/endpoints/handlers/negotiation/negotiate.go`, `NegotiateMediaTypeOptions` and
 * `NegotiateOutputMediaTypeStream`, with `github.com/munnerz/goautoneg`'s `ParseAccept`):
 *
 * - no `Accept`: the first served type, JSON;
 * - else the clauses sorted by goautoneg's order (a higher q first, then a concrete type before
 *   `*`, a concrete subtype before `*`; `q=0` is not excluded), and the first clause that matches
 *   a served type in the order JSON, YAML, protobuf (`*\/*` and `application/*` match JSON) wins;
 *   a clause whose `stream` is not `watch` or that asks for a conversion (`as`, `g`, `v`, which
 *   are not served here) matches nothing;
 * - a watch needs a type with a stream form: JSON or protobuf; YAML gives 406 with the stream
 *   types listed;
 * - nothing matching: 406 `only the following media types are accepted: ...`.
 *
 * Before the handler negotiates, go-restful's router (`github.com/emicklei/go-restful/v3`
 * `jsr311.go`, `detectRoute`, and `route.go`, `matchesAccept`) drops a request whose `Accept`
 * names no type of the route's `Produces` (each clause without its parameters, compared exactly;
 * `*\/*` matches, `application/*` does not): 406 `406: Not Acceptable\n\nAvailable
 * representations: ...` with empty details ({@link routerAcceptError}). A collection's GET route
 * also produces the stream types (`apiserver/pkg/endpoints/installer.go`, `allMediaTypes`).
 *
 * Protobuf is served only when the server has the `.proto` files (see
 * {@link import("../kube_protos.ts")}); without them the server is one that does not offer it.
 *
 * @module
 */

import { failureStatus, StatusError } from "./status_errors.ts";

/** A served media type. */
export type MediaType = "application/json" | "application/yaml" | typeof PROTOBUF;

const PROTOBUF = "application/vnd.kubernetes.protobuf";

/** One clause of an `Accept` header, as goautoneg parses it. */
export interface AcceptClause {
  type: string;
  subType: string;
  q: number;
  params: Record<string, string>;
}

/** Splits at the first `sep`, as goautoneg's `nextSplitElement`. */
function split(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i === -1 ? [s, ""] : [s.slice(0, i), s.slice(i + 1)];
}

const trim = (s: string) => s.replace(/^ +| +$/g, "");

/** goautoneg's `acceptSlice.Less`. */
function less(a: AcceptClause, b: AcceptClause): boolean {
  if (a.q > b.q) return true;
  if (a.type !== "*" && b.type === "*") return true;
  if (a.subType !== "*" && b.subType === "*") return true;
  return false;
}

/**
 * The clauses of an `Accept` header in the order they are tried (goautoneg `ParseAccept`; Go's
 * `sort.Sort` is an insertion sort for the dozen clauses a header has, done the same way here).
 */
export function parseAccept(header: string): AcceptClause[] {
  const out: AcceptClause[] = [];
  let remaining = header;
  while (remaining.length > 0) {
    let part: string;
    [part, remaining] = split(remaining, ",");
    part = trim(part);
    const [sp, paramsText] = split(part, ";");
    const [t, subRest] = split(sp, "/");
    const clause: AcceptClause = { type: trim(t), subType: "", q: 1, params: {} };
    if (subRest.length === 0) {
      if (clause.type !== "*") continue;
      clause.subType = "*";
    } else {
      const [sub, extra] = split(subRest, "/");
      if (extra.length > 0) continue;
      clause.subType = trim(sub);
    }
    let rest = paramsText;
    while (rest.length > 0) {
      let p: string;
      [p, rest] = split(rest, ";");
      const [k, vRest] = split(p, "=");
      if (vRest.length === 0) continue;
      const [v, more] = split(vRest, "=");
      if (more.length !== 0) continue;
      const token = trim(k);
      if (token === "q") {
        const q = Number(v);
        clause.q = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v) ? Math.fround(q) : 0;
      } else {
        clause.params[token] = trim(v);
      }
    }
    out.push(clause);
  }
  for (let i = 1; i < out.length; i++) {
    for (let j = i; j > 0 && less(out[j]!, out[j - 1]!); j--) {
      [out[j], out[j - 1]] = [out[j - 1]!, out[j]!];
    }
  }
  return out;
}

/** What {@link negotiateOutput} chose. */
export interface Negotiated {
  mediaType: MediaType;
}

/** 406 `NotAcceptable` listing `accepted`. */
export function notAcceptable(accepted: readonly string[]): StatusError {
  return new StatusError(
    failureStatus(
      406,
      "NotAcceptable",
      `only the following media types are accepted: ${accepted.join(", ")}`,
    ),
  );
}

/**
 * The router's 406 for `accept` on a route (undefined when some clause matches).
 *
 * @param collectionGet the route of a GET on a collection (list and watch), which also produces
 *   the `;stream=watch` types.
 */
export function routerAcceptError(
  accept: string,
  collectionGet: boolean,
  protobuf: boolean,
): StatusError | undefined {
  const served = servedMediaTypes(protobuf);
  const produces: string[] = collectionGet
    ? [...served, ...served.filter((m) => m !== "application/yaml").map((m) => `${m};stream=watch`)]
    : served;
  let remaining = accept.length === 0 ? "*/*" : accept;
  for (;;) {
    let mimeType: string;
    [mimeType, remaining] = split(remaining, ",");
    mimeType = trim(split(mimeType, ";")[0]);
    if (mimeType === "*/*" || produces.includes(mimeType)) return undefined;
    if (remaining.length === 0) break;
  }
  return new StatusError(
    failureStatus(
      406,
      "NotAcceptable",
      `406: Not Acceptable\n\nAvailable representations: ${produces.join(", ")}`,
      {},
    ),
  );
}

/** The served types, in kube-apiserver's order. */
export function servedMediaTypes(protobuf: boolean): MediaType[] {
  return protobuf
    ? ["application/json", "application/yaml", PROTOBUF]
    : ["application/json", "application/yaml"];
}

/**
 * The response type for `accept`.
 *
 * @param stream true for a watch (the type needs a stream form).
 * @param protobuf whether protobuf is served.
 * @throws {StatusError} 406 when no served type is acceptable.
 */
export function negotiateOutput(accept: string, stream: boolean, protobuf: boolean): Negotiated {
  const served = servedMediaTypes(protobuf);
  let chosen: MediaType | undefined;
  if (accept.length === 0) {
    chosen = served[0];
  } else {
    outer: for (const clause of parseAccept(accept)) {
      for (const m of served) {
        const [type, subType] = split(m, "/");
        const matches = (clause.type === type && clause.subType === subType) ||
          (clause.type === type && clause.subType === "*") ||
          (clause.type === "*" && clause.subType === "*");
        if (matches && acceptable(clause, m)) {
          chosen = m;
          break outer;
        }
      }
    }
  }
  if (chosen === undefined) throw notAcceptable(served);
  if (stream && chosen === "application/yaml") {
    throw notAcceptable(
      served.filter((m) => m !== "application/yaml").map((m) => `${m};stream=watch`),
    );
  }
  return { mediaType: chosen };
}

/** `acceptMediaTypeOptions`: the parameters a clause may have for `m`. */
function acceptable(clause: AcceptClause, m: MediaType): boolean {
  const p = clause.params;
  const stream = p.stream ?? "";
  if (stream.length > 0 && (m === "application/yaml" || stream !== "watch")) return false;
  // A conversion (`as=Table;g=meta.k8s.io;v=v1`) is not served here.
  if ("as" in p || "g" in p || "v" in p) return false;
  return true;
}
