/**
 * Response and request bodies of {@link import("./server.ts").MemoryApiServer} in the media type
 * negotiated ({@link import("./negotiation.ts")}): JSON, YAML (`sigs.k8s.io/yaml` of the JSON,
 * keys sorted) or Kubernetes protobuf (objects, lists, Status errors and watch frames, through
 * {@link import("../kube_protos.ts")}), and create and update bodies in protobuf read into their
 * JSON form.
 *
 * @module
 */

import yaml from "js-yaml";
import {
  KUBE_PROTOBUF,
  type KubeProtos,
  kubeProtosMissing,
  loadKubeProtos,
  watchFrame,
  withoutZeroValues,
  wrapUnknown,
} from "../kube_protos.ts";
import {
  type MediaType,
  type Negotiated,
  negotiateOutput,
  routerAcceptError,
} from "./negotiation.ts";
import { badRequest, type StatusError } from "./status_errors.ts";
import type { WatchLine } from "./watch_hub.ts";

/** The response's `Content-Type` of a watch in `m`. */
export function watchContentType(m: MediaType): string {
  return m === "application/json" ? m : `${m};stream=watch`;
}

/** The media of one server: whether it serves protobuf, and its codec once loaded. */
export class ServerMedia {
  readonly #enabled: boolean;
  #codec: KubeProtos | undefined;
  #available: boolean | undefined;

  /** @param protobuf false: protobuf is not served (a server without the `.proto` files). */
  constructor(protobuf: boolean) {
    this.#enabled = protobuf;
  }

  /** True when protobuf is served (the `.proto` files are there; they are loaded on first use). */
  get protobuf(): boolean {
    this.#available ??= this.#enabled && kubeProtosMissing() === undefined;
    return this.#available;
  }

  /** The codec. @throws {Error} when protobuf is not served. */
  get codec(): KubeProtos {
    if (!this.protobuf) throw new Error("protobuf is not served");
    this.#codec ??= loadKubeProtos();
    if (this.#codec === undefined) throw new Error("the .proto files did not load");
    return this.#codec;
  }

  /** The response type for `accept`. @throws {StatusError} 406. */
  negotiate(accept: string, stream = false): Negotiated {
    return negotiateOutput(accept, stream, this.protobuf);
  }

  /**
   * The response type for `accept`, or JSON when nothing is acceptable: the type an error is
   * written in (`responsewriters.ErrorNegotiated` falls back to JSON).
   */
  errorType(accept: string): MediaType {
    try {
      return negotiateOutput(accept, false, this.protobuf).mediaType;
    } catch {
      return "application/json";
    }
  }

  /**
   * An error for a request whose `Accept` nothing served fits: `responsewriters.ErrorNegotiated`
   * then writes the Status with `WriteRawJSON`, indented by two spaces, in `metav1.Status`'s
   * field order.
   */
  rawJsonError(err: StatusError): Response {
    const { kind, apiVersion, metadata, status, message, reason, details, code, ...rest } = err
      .status as unknown as Record<string, unknown>;
    const ordered = { kind, apiVersion, metadata, status, message, reason, details, code, ...rest };
    return new Response(JSON.stringify(ordered, null, 2), {
      status: err.status.code,
      headers: { "content-type": "application/json" },
    });
  }

  /** True when some served type fits `accept`. */
  negotiable(accept: string): boolean {
    try {
      negotiateOutput(accept, false, this.protobuf);
      return true;
    } catch {
      return false;
    }
  }

  /** The router's 406 (see {@link routerAcceptError}), or undefined. */
  routerError(accept: string, collectionGet: boolean): StatusError | undefined {
    return routerAcceptError(accept, collectionGet, this.protobuf);
  }

  /** A response of `body` in `m`. */
  respond(
    m: MediaType,
    code: number,
    body: unknown,
    warnings: readonly string[] = [],
  ): Response {
    let data: BodyInit;
    if (m === KUBE_PROTOBUF) {
      data = this.#encode(body as Record<string, unknown>) as Uint8Array<ArrayBuffer>;
    } else if (m === "application/yaml") {
      data = yaml.dump(body, { sortKeys: true, lineWidth: -1, noRefs: true });
    } else {
      data = JSON.stringify(body);
    }
    const headers = new Headers({ "content-type": m });
    for (const w of warnings) headers.append("warning", w);
    return new Response(data, { status: code, headers });
  }

  /** The answer for an error in `m`, with `Retry-After` when the Status says so. */
  error(m: MediaType, err: StatusError): Response {
    const res = this.respond(m, err.status.code, err.status);
    const retry = err.status.details?.retryAfterSeconds;
    if (retry !== undefined) res.headers.set("retry-after", String(retry));
    return res;
  }

  /** The bytes of one watch event in `m`'s stream form; undefined for JSON lines. */
  watchEncoder(m: MediaType): ((line: WatchLine) => Uint8Array) | undefined {
    if (m !== KUBE_PROTOBUF) return undefined;
    return (line) => {
      const object = line.object as Record<string, unknown>;
      const envelope = wrapUnknown(
        object.apiVersion as string,
        object.kind as string,
        this.#raw(object),
      );
      // metav1.WatchEvent: type = 1, object = 2 (RawExtension: raw = 1).
      return watchFrame(concat([
        lengthDelimited(1, utf8.encode(line.type)),
        lengthDelimited(2, lengthDelimited(1, envelope)),
      ]));
    };
  }

  /**
   * A list of `items` (stored objects, with their kind) in `m`: in JSON without each item's kind
   * and apiVersion, as the real server writes them.
   */
  respondList(
    m: MediaType,
    list: { kind: string; apiVersion: string; metadata: Record<string, unknown> },
    items: readonly Record<string, unknown>[],
  ): Response {
    if (m !== KUBE_PROTOBUF) {
      return this.respond(m, 200, {
        ...list,
        items: items.map(({ kind: _k, apiVersion: _a, ...item }) => item),
      });
    }
    const type = this.codec.typeOf(list.apiVersion, list.kind);
    const parts = [this.codec.encodeMessage(type, { metadata: list.metadata })];
    for (const item of items) parts.push(lengthDelimited(2, this.#raw(item)));
    const data = wrapUnknown(list.apiVersion, list.kind, concat(parts));
    return new Response(data as Uint8Array<ArrayBuffer>, {
      status: 200,
      headers: { "content-type": m },
    });
  }

  /**
   * The message bytes of an object (without kind and apiVersion), kept per stored object while
   * its resourceVersion stays: a list and every watch of it encode each object once.
   */
  #raw(object: Record<string, unknown>): Uint8Array {
    const { apiVersion, kind, ...rest } = object;
    const rv = (rest.metadata as { resourceVersion?: string } | undefined)?.resourceVersion;
    const cached = this.#cache.get(object);
    if (cached !== undefined && cached.rv === rv) return cached.raw;
    const raw = this.codec.encodeMessage(
      this.codec.typeOf(apiVersion as string, kind as string),
      rest,
    );
    this.#cache.set(object, { rv, raw });
    return raw;
  }

  readonly #cache = new WeakMap<object, { rv: string | undefined; raw: Uint8Array }>();

  /**
   * A protobuf create or update body as its JSON form. ObjectMeta's zero values, which a Go
   * client writes in protobuf and leaves out in JSON (every member is `omitempty`), are dropped.
   *
   * @throws {StatusError} 400 when the body is not a Kubernetes protobuf object.
   */
  decodeBody(bytes: Uint8Array): Record<string, unknown> {
    let object: Record<string, unknown>;
    try {
      object = this.codec.decode(bytes);
    } catch (err) {
      throw badRequest(
        `the object provided is unrecognized: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    if (typeof object.metadata === "object" && object.metadata !== null) {
      object.metadata = withoutZeroValues(object.metadata);
    }
    return object;
  }

  #encode(body: Record<string, unknown>): Uint8Array {
    return this.codec.encode(body);
  }
}

const utf8 = new TextEncoder();

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function lengthDelimited(no: number, data: Uint8Array): Uint8Array {
  const head = [...varint((no << 3) | 2), ...varint(data.length)];
  const out = new Uint8Array(head.length + data.length);
  out.set(head);
  out.set(data, head.length);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let i = 0;
  for (const p of parts) {
    out.set(p, i);
    i += p.length;
  }
  return out;
}
