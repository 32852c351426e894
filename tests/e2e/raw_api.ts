/**
 * A deliberately plain HTTPS client for the suite's own view of the API server: `fetch` with a
 * client certificate, raw paths, raw bodies and raw answers. The suite checks the attacher's
 * results through it, so the checks do not depend on the attacher's own client.
 *
 * @module
 */

/** An answer of the API server. */
export interface RawResponse {
  status: number;
  /** `Content-Type` header, or "". */
  contentType: string;
  /** `Warning` header(s), or "". */
  warning: string;
  text: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: unknown;
}

/** Options of one request. */
export interface RawRequest {
  /** A JSON value (serialized) or a string (sent as is). */
  body?: unknown;
  /** Default `application/json` when there is a body. */
  contentType?: string;
  /** Extra headers. */
  headers?: Record<string, string>;
}

/** Connection settings of a {@link RawApi}. */
export interface RawApiOptions {
  /** e.g. `https://127.0.0.1:6443`. */
  server: string;
  /** PEM texts. */
  caCert: string;
  clientCert: string;
  clientKey: string;
}

/** Thrown by the `*Ok` helpers for an unexpected status. */
export class UnexpectedStatusError extends Error {
  readonly response: RawResponse;

  constructor(what: string, response: RawResponse) {
    super(`${what}: HTTP ${response.status}: ${response.text.slice(0, 500)}`);
    this.name = "UnexpectedStatusError";
    this.response = response;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** A minimal authenticated client. Call {@link RawApi.close} when done. */
export class RawApi {
  readonly #server: string;
  readonly #options: RawApiOptions;
  #client: Deno.HttpClient | undefined;

  /** No I/O: the HTTP client is made on the first request. */
  constructor(options: RawApiOptions) {
    this.#server = options.server.replace(/\/$/, "");
    this.#options = options;
  }

  /** The server URL. */
  get server(): string {
    return this.#server;
  }

  #http(): Deno.HttpClient {
    this.#client ??= Deno.createHttpClient({
      caCerts: [this.#options.caCert],
      cert: this.#options.clientCert,
      key: this.#options.clientKey,
    });
    return this.#client;
  }

  /** Sends one request and reads the whole answer. Rejects only when no answer came. */
  async request(method: string, path: string, req: RawRequest = {}): Promise<RawResponse> {
    const headers: Record<string, string> = { ...req.headers };
    let body: string | undefined;
    if (req.body !== undefined) {
      body = typeof req.body === "string" ? req.body : JSON.stringify(req.body);
      headers["content-type"] = req.contentType ?? "application/json";
    }
    const res = await fetch(`${this.#server}${path}`, {
      method,
      headers,
      body,
      client: this.#http(),
    });
    const text = await res.text();
    return {
      status: res.status,
      contentType: res.headers.get("content-type") ?? "",
      warning: res.headers.get("warning") ?? "",
      text,
      json: parseJson(text),
    };
  }

  /**
   * Opens a watch (or any streaming GET) and returns the response; the caller reads and cancels
   * the body.
   */
  async stream(
    path: string,
    signal: AbortSignal,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    return await fetch(`${this.#server}${path}`, { client: this.#http(), signal, headers });
  }

  /** One request with any headers and body (protobuf), the answer's bytes unread as text. */
  async requestBytes(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: Uint8Array | string,
  ): Promise<{ status: number; contentType: string; bytes: Uint8Array }> {
    const res = await fetch(`${this.#server}${path}`, {
      method,
      headers,
      body: body as BodyInit | undefined,
      client: this.#http(),
    });
    return {
      status: res.status,
      contentType: res.headers.get("content-type") ?? "",
      bytes: new Uint8Array(await res.arrayBuffer()),
    };
  }

  /** GET that must answer 200; the JSON body. @throws {UnexpectedStatusError} otherwise. */
  async getOk<T>(path: string): Promise<T> {
    const res = await this.request("GET", path);
    if (res.status !== 200) throw new UnexpectedStatusError(`GET ${path}`, res);
    return res.json as T;
  }

  /** GET; undefined on 404. @throws {UnexpectedStatusError} for other errors. */
  async find<T>(path: string): Promise<T | undefined> {
    const res = await this.request("GET", path);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new UnexpectedStatusError(`GET ${path}`, res);
    return res.json as T;
  }

  /** POST that must answer 201 (or 200); the created object. */
  async createOk<T>(path: string, obj: unknown): Promise<T> {
    const res = await this.request("POST", path, { body: obj });
    if (res.status !== 201 && res.status !== 200) {
      throw new UnexpectedStatusError(`POST ${path}`, res);
    }
    return res.json as T;
  }

  /** PATCH that must answer 200. `type` is `merge` or `json`. */
  async patchOk<T>(path: string, type: "merge" | "json", body: unknown): Promise<T> {
    const contentType = type === "merge"
      ? "application/merge-patch+json"
      : "application/json-patch+json";
    const res = await this.request("PATCH", path, { body, contentType });
    if (res.status !== 200) throw new UnexpectedStatusError(`PATCH ${path}`, res);
    return res.json as T;
  }

  /** DELETE that must answer 200 or 202, or 404 when `missingOk`. */
  async deleteOk(path: string, missingOk = true): Promise<void> {
    const res = await this.request("DELETE", path);
    if (res.status === 200 || res.status === 202) return;
    if (missingOk && res.status === 404) return;
    throw new UnexpectedStatusError(`DELETE ${path}`, res);
  }

  /** Closes the connection pool. */
  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }
}
