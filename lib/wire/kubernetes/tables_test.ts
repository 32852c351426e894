/**
 * Every field number the Kubernetes decoder uses (`./tables.ts`), checked against the upstream
 * `generated.proto` of `k8s.io/api` and `k8s.io/apimachinery` v0.35.4 and v0.37.2, read from the
 * Go module cache (`$GOMODCACHE`, else `~/go/pkg/mod`; fill it with
 * `GOFLAGS=-mod=mod go mod download k8s.io/api@v0.37.2 k8s.io/apimachinery@v0.37.2 ...`). Without
 * the files the tests are ignored with the reason in their names, unless
 * `KUBE_PROTOS_REQUIRED=1` (as `.ci/run` sets) makes them fail.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type FieldKind,
  KINDS,
  type MessageTable,
  UNKNOWN_FIELDS,
  WATCH_EVENT_FIELDS,
} from "./tables.ts";

/** The releases checked: the oldest and the newest Kubernetes the e2e suite runs (1.35, 1.37). */
export const KUBE_PROTO_VERSIONS: readonly string[] = ["v0.35.4", "v0.37.2"];

const HOME = Deno.env.get("HOME") ?? "/root";
const MOD_CACHE = Deno.env.get("GOMODCACHE") ?? `${HOME}/go/pkg/mod`;
const REQUIRED = Deno.env.get("KUBE_PROTOS_REQUIRED") === "1";

/** The `generated.proto` that declares proto package `pkg`, in release `version`. */
function protoFile(pkg: string, version: string): string {
  const meta = "k8s.io.apimachinery.";
  if (pkg.startsWith(meta)) {
    return `${MOD_CACHE}/k8s.io/apimachinery@${version}/${
      pkg.slice(meta.length).replaceAll(".", "/")
    }/generated.proto`;
  }
  const api = "k8s.io.api.";
  if (!pkg.startsWith(api)) throw new Error(`no module for ${pkg}`);
  return `${MOD_CACHE}/k8s.io/api@${version}/${
    pkg.slice(api.length).replaceAll(".", "/")
  }/generated.proto`;
}

interface ProtoField {
  label: string;
  type: string;
  number: number;
}

/** The fields of every message of a `generated.proto`, by message name then field name. */
function parseProto(text: string): Map<string, Map<string, ProtoField>> {
  const messages = new Map<string, Map<string, ProtoField>>();
  let current: Map<string, ProtoField> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\/\/.*$/, "").trim();
    const start = /^message (\w+) \{$/.exec(line);
    if (start !== null) {
      current = new Map();
      messages.set(start[1]!, current);
      continue;
    }
    if (line === "}") {
      current = undefined;
      continue;
    }
    const field = /^(optional|repeated)?\s*(map<[^>]+>|[\w.]+) (\w+) = (\d+);$/.exec(line);
    if (field !== null && current !== undefined) {
      current.set(field[3]!, {
        label: field[1] ?? "",
        type: field[2]!,
        number: Number(field[4]),
      });
    }
  }
  return messages;
}

/** The proto types a field kind may have. */
function typeMatches(kind: FieldKind, f: ProtoField, sub: MessageTable | undefined): boolean {
  const last = (t: string) => t.split(".").at(-1)!;
  switch (kind) {
    case "string":
      return f.type === "string" && f.label === "optional";
    case "bool":
      return f.type === "bool";
    case "int32":
      return f.type === "int32";
    case "int64":
      return f.type === "int64";
    case "time":
      return last(f.type) === "Time";
    case "microTime":
      return last(f.type) === "MicroTime";
    case "map":
      return f.type === "map<string, string>";
    case "quantityMap":
      return /^map<string, [\w.]*Quantity>$/.test(f.type);
    case "strings":
      return f.type === "string" && f.label === "repeated";
    case "messages":
      return f.label === "repeated" && last(f.type) === last(sub!.proto);
    case "message":
    case "inline":
      return f.label === "optional" && last(f.type) === last(sub!.proto);
  }
}

/** Every table reachable from the decoder's kinds through fields that `version` has. */
function allTables(version: string): MessageTable[] {
  const seen = new Set<MessageTable>();
  const visit = (t: MessageTable) => {
    if (seen.has(t)) return;
    seen.add(t);
    for (const f of t.fields) {
      if (f.message !== undefined && !(f.since !== undefined && f.since > version)) {
        visit(f.message);
      }
    }
  };
  for (const t of KINDS.values()) visit(t);
  return [...seen];
}

function missingFiles(version: string): string | undefined {
  for (const t of allTables(version)) {
    const pkg = t.proto.slice(0, t.proto.lastIndexOf("."));
    const file = protoFile(pkg, version);
    try {
      Deno.statSync(file);
    } catch {
      return `${file} is absent (GOFLAGS=-mod=mod go mod download k8s.io/api@${version} ` +
        `k8s.io/apimachinery@${version})`;
    }
  }
  return undefined;
}

for (const version of KUBE_PROTO_VERSIONS) {
  const missing = missingFiles(version);
  const ignore = missing !== undefined && !REQUIRED;
  Deno.test({
    name: `tables: every field number matches k8s.io ${version} generated.proto` +
      (ignore ? ` (ignored: ${missing})` : ""),
    ignore,
    fn() {
      if (missing !== undefined) throw new Error(`KUBE_PROTOS_REQUIRED=1 but ${missing}`);
      const files = new Map<string, Map<string, Map<string, ProtoField>>>();
      const messageOf = (proto: string) => {
        const pkg = proto.slice(0, proto.lastIndexOf("."));
        const file = protoFile(pkg, version);
        let parsed = files.get(file);
        if (parsed === undefined) files.set(file, parsed = parseProto(Deno.readTextFileSync(file)));
        const message = parsed.get(proto.slice(pkg.length + 1));
        assert.ok(message !== undefined, `${proto} is not in ${file}`);
        return message;
      };
      let checked = 0;
      for (const table of allTables(version)) {
        const message = messageOf(table.proto);
        for (const f of table.fields) {
          if (f.since !== undefined && f.since > version) continue;
          const upstream = message.get(f.name);
          assert.ok(upstream !== undefined, `${table.proto}.${f.name} is not upstream`);
          assert.equal(upstream.number, f.number, `${table.proto}.${f.name}`);
          assert.ok(
            typeMatches(f.kind, upstream, f.message),
            `${table.proto}.${f.name}: ${f.kind} but upstream ${upstream.label} ${upstream.type}`,
          );
          checked++;
        }
      }
      const meta = "k8s.io.apimachinery.pkg.apis.meta.v1";
      const runtime = "k8s.io.apimachinery.pkg.runtime";
      const fixed: [string, string, number][] = [
        [`${meta}.WatchEvent`, "type", WATCH_EVENT_FIELDS.type],
        [`${meta}.WatchEvent`, "object", WATCH_EVENT_FIELDS.object],
        [`${runtime}.RawExtension`, "raw", WATCH_EVENT_FIELDS.raw],
        [`${runtime}.Unknown`, "typeMeta", UNKNOWN_FIELDS.typeMeta],
        [`${runtime}.Unknown`, "raw", UNKNOWN_FIELDS.raw],
        [`${runtime}.Unknown`, "contentEncoding", UNKNOWN_FIELDS.contentEncoding],
        [`${runtime}.Unknown`, "contentType", UNKNOWN_FIELDS.contentType],
        [`${runtime}.TypeMeta`, "apiVersion", UNKNOWN_FIELDS.apiVersion],
        [`${runtime}.TypeMeta`, "kind", UNKNOWN_FIELDS.kind],
        [`${meta}.Time`, "seconds", 1],
        [`${meta}.Time`, "nanos", 2],
        [`${meta}.MicroTime`, "seconds", 1],
        [`${meta}.MicroTime`, "nanos", 2],
        ["k8s.io.apimachinery.pkg.api.resource.Quantity", "string", 1],
        // Skipped, but named in the docs: managedFields is the field the decoder exists to skip.
        [`${meta}.ObjectMeta`, "managedFields", 17],
      ];
      for (const [proto, name, number] of fixed) {
        assert.equal(messageOf(proto).get(name)?.number, number, `${proto}.${name}`);
        checked++;
      }
      assert.ok(checked > 150, `only ${checked} fields checked`);
    },
  });
}
