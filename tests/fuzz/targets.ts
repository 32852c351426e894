/**
 * The fuzz targets `deno task fuzz` runs, one line each; each lives in `./targets/<name>.ts`.
 *
 * @module
 */

import type { FuzzTarget } from "./target.ts";
import { target as hpack } from "./targets/hpack.ts";
import { target as http1Response } from "./targets/http1_response.ts";
import { target as http2Frames } from "./targets/http2_frames.ts";
import { target as http2Session } from "./targets/http2_session.ts";
import { target as kubeProtobuf } from "./targets/kube_protobuf.ts";
import { target as protobuf } from "./targets/protobuf.ts";
import { target as watchSplitter } from "./targets/watch_splitter.ts";

/** Every target, in the order a run takes them. */
export const TARGETS: readonly FuzzTarget[] = [
  hpack,
  http2Frames,
  http2Session,
  protobuf,
  http1Response,
  watchSplitter,
  kubeProtobuf,
];
