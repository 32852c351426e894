import assert from "node:assert/strict";
import { decodeObjectBody } from "./body_decoder.ts";
import { resolveServedResource } from "./resources.ts";
import { StatusError } from "./status_errors.ts";

// Every expected text below is kube-apiserver v1.34.4's answer to the same body, POSTed to
// /apis/storage.k8s.io/v1/volumeattachments.

const VA = resolveServedResource("volumeattachments");

/** The message of the error `decodeObjectBody` throws. */
function failure(contentType: string, text: string, fieldValidation = ""): StatusError {
  try {
    decodeObjectBody(VA, contentType, text, fieldValidation);
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  assert.fail(`decoded: ${text}`);
}

const VA_YAML = [
  "apiVersion: storage.k8s.io/v1",
  "kind: VolumeAttachment",
  "metadata:",
  "  name: y1",
  "spec:",
  "  attacher: a.b",
  "  nodeName: node-1",
  "  source:",
  "    persistentVolumeName: pv1",
  "",
].join("\n");

Deno.test("decodeObjectBody reads a YAML body as the JSON object it stands for", () => {
  const decoded = decodeObjectBody(VA, "application/yaml", VA_YAML, "");
  assert.deepEqual(decoded.body, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "y1" },
    spec: { attacher: "a.b", nodeName: "node-1", source: { persistentVolumeName: "pv1" } },
  });
  assert.deepEqual(decoded.warnings, []);
  // YAML 1.1 booleans, as go-yaml v2 reads them: `n` is false (so a VolumeAttachment's nodeName
  // `n` fails as a bool, as on the real server). Shown on PersistentVolumes, whose field types
  // are not described here.
  const bools = decodeObjectBody(
    resolveServedResource("persistentvolumes"),
    "application/yaml",
    "metadata:\n  labels:\n    a: yes\n    b: n\n    c: 'yes'\n    d: on\n",
    "",
  );
  assert.deepEqual(bools.body.metadata, { labels: { a: true, b: false, c: "yes", d: true } });
  // Only the first document counts; a comment alone is an empty object.
  assert.deepEqual(
    decodeObjectBody(VA, "application/yaml", "---\nkind: VolumeAttachment\n---\nkind: X\n", "")
      .body,
    { kind: "VolumeAttachment" },
  );
  assert.deepEqual(decodeObjectBody(VA, "application/yaml", "# only a comment\n", "").body, {});
});

Deno.test("decodeObjectBody reports duplicate YAML keys with go-yaml's text, before unknown fields", () => {
  const text = [
    "kind: VolumeAttachment",
    "apiVersion: storage.k8s.io/v1",
    "metadata:",
    "  name: x",
    "  bogus: 1",
    "  labels:",
    "    a: b",
    "    a: c",
    "spec:",
    "  attacher: a",
    "  nodeName: node1",
    "  zz: 1",
    "  source:",
    "    persistentVolumeName: p",
    "",
  ].join("\n");
  const decoded = decodeObjectBody(VA, "application/yaml", text, "");
  assert.deepEqual(decoded.warnings, [
    '299 - "line 8: key \\"a\\" already set in map"',
    '299 - "unknown field \\"metadata.bogus\\""',
    '299 - "unknown field \\"spec.zz\\""',
  ]);
  assert.deepEqual((decoded.body.metadata as Record<string, unknown>).labels, { a: "c" });
  assert.equal(
    failure("application/yaml", text, "Strict").message,
    'VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: strict decoding ' +
      'error: yaml: unmarshal errors:\n  line 8: key "a" already set in map, unknown field ' +
      '"metadata.bogus", unknown field "spec.zz"',
  );
});

Deno.test("decodeObjectBody reports duplicate JSON fields in document order with the unknown ones", () => {
  const text = '{"kind":"VolumeAttachment","apiVersion":"storage.k8s.io/v1","metadata":' +
    '{"name":"x","bogus":1,"name":"x2","labels":{"a":"b","a":"c"}},"spec":{"attacher":"a",' +
    '"nodeName":"n","zz":1,"source":{"persistentVolumeName":"p"}}}';
  const decoded = decodeObjectBody(VA, "application/json", text, "");
  assert.deepEqual(decoded.warnings, [
    '299 - "unknown field \\"metadata.bogus\\""',
    '299 - "duplicate field \\"metadata.name\\""',
    '299 - "duplicate field \\"metadata.labels.a\\""',
    '299 - "unknown field \\"spec.zz\\""',
  ]);
  // The last of duplicate members counts (real: the object is named x2).
  assert.deepEqual(decoded.body.metadata, { name: "x2", labels: { a: "c" } });
  const strict = '{"kind":"VolumeAttachment","apiVersion":"storage.k8s.io/v1","metadata":' +
    '{"name":"x","bogus":1,"name":"x"},"spec":{"attacher":"a","nodeName":"n","zz":1,' +
    '"source":{"persistentVolumeName":"p"}}}';
  assert.equal(
    failure("application/json", strict, "Strict").message,
    'VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: strict decoding ' +
      'error: unknown field "metadata.bogus", duplicate field "metadata.name", unknown field ' +
      '"spec.zz"',
  );
  assert.deepEqual(decodeObjectBody(VA, "application/json", text, "Ignore").warnings, []);
});

Deno.test("decodeObjectBody words undecodable bodies as kube-apiserver does", () => {
  const cases: [string, string, string][] = [
    [
      "application/json",
      '{"kind":',
      'couldn\'t get version/kind; json parse error: unexpected end of JSON input ({"kind":)',
    ],
    [
      "application/json",
      "[1]",
      "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value " +
      'of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string ' +
      '"json:\\"kind,omitempty\\"" } (5b315d)',
    ],
    [
      "application/json",
      '"s"',
      "couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value " +
      'of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string ' +
      '"json:\\"kind,omitempty\\"" } (227322)',
    ],
    [
      "application/json",
      '{"kind":5}',
      "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct " +
      'field .kind of type string ({"kind":5})',
    ],
    [
      "application/json",
      ' {"kind":"VolumeAttachment",',
      "couldn't get version/kind; json parse error: unexpected end of JSON input " +
      "(207b226b696e64223a22566f6c756d654174746163686d656e74222c)",
    ],
    [
      "",
      "",
      "couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)",
    ],
    [
      "application/yaml",
      "- a\n- b\n",
      "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value " +
      'of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string ' +
      '"json:\\"kind,omitempty\\"" } (2d20610a2d20620a)',
    ],
  ];
  for (const [type, text, err] of cases) {
    const got = failure(type, text);
    assert.equal(got.status.code, 400, text);
    assert.equal(got.status.reason, "BadRequest", text);
    assert.equal(
      got.message,
      `the object provided is unrecognized (must be of type VolumeAttachment): ${err}`,
      text,
    );
  }
  // A long JSON object is cut after 30 bytes.
  assert.match(
    failure("application/json", '{"kind":"VolumeAttachment","apiVersion":').message,
    /\(\{"kind":"VolumeAttachment","ap \.\.\.\)$/,
  );
  // YAML syntax errors: the envelope and the line are the real ones (real: `yaml: line 1: did
  // not find expected ',' or ']' (613a205b312c20320a)`); the reason is js-yaml's.
  assert.match(
    failure("application/yaml", "a: [1, 2\n").message,
    /^the object provided is unrecognized \(must be of type VolumeAttachment\): yaml: line \d+: .+ \(613a205b312c20320a\)$/,
  );
});

Deno.test("decodeObjectBody refuses another kind or API version with the real texts", () => {
  // The scheme's line is apimachinery's: pkg/runtime/scheme.go:110 in v1.34.4, :111 in v1.35.4 and
  // v1.37.2.
  const body = (kind: string, apiVersion: string) =>
    JSON.stringify({ kind, ...(apiVersion ? { apiVersion } : {}), metadata: { name: "x" } });
  const cases: [string, string, string][] = [
    [
      "Foo",
      "v1",
      'Foo in version "v1" cannot be handled as a VolumeAttachment: no kind "Foo" is ' +
      'registered for version "v1" in scheme "pkg/runtime/scheme.go:111"',
    ],
    [
      "VolumeAttachment",
      "v1",
      'VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: no kind ' +
      '"VolumeAttachment" is registered for version "v1" in scheme "pkg/runtime/scheme.go:111"',
    ],
    [
      "VolumeAttachment",
      "storage.k8s.io/v1beta1",
      "the API version in the data (storage.k8s.io/v1beta1) does not match the expected API " +
      "version (storage.k8s.io/v1)",
    ],
    [
      "PersistentVolume",
      "v1",
      'PersistentVolume in version "v1" cannot be handled as a VolumeAttachment: converting ' +
      "(v1.PersistentVolume) to (storage.VolumeAttachment): unknown conversion",
    ],
  ];
  for (const [kind, apiVersion, message] of cases) {
    const err = failure("application/json", body(kind, apiVersion));
    assert.equal(err.status.code, 400);
    assert.equal(err.message, message);
  }
  // Missing kind or apiVersion take the resource's; null is an empty object.
  assert.deepEqual(
    decodeObjectBody(VA, "application/json", body("VolumeAttachment", ""), "").body,
    { kind: "VolumeAttachment", metadata: { name: "x" } },
  );
  assert.deepEqual(decodeObjectBody(VA, "application/json", "null", "").body, {});
});

Deno.test("decodeObjectBody refuses other media types with the accepted ones listed", () => {
  for (const type of ["application/x-yaml", "text/yaml", "text/plain"]) {
    const err = failure(type, "kind: VolumeAttachment\n");
    assert.deepEqual(err.status, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "the body of the request was in an unknown format - accepted media types " +
        "include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
      reason: "UnsupportedMediaType",
      code: 415,
    });
  }
});

Deno.test("decodeObjectBody refuses a value of the wrong type as encoding/json words it", () => {
  const prefix =
    'VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: json: ' +
    "cannot unmarshal ";
  const va = (spec: unknown, metadata: unknown = { name: "x" }) =>
    JSON.stringify({ kind: "VolumeAttachment", apiVersion: "storage.k8s.io/v1", metadata, spec });
  // Real (v1.34.4) answers to the same bodies.
  assert.equal(
    failure("application/json", va({ attacher: 5 })).message,
    `${prefix}number into Go struct field VolumeAttachmentSpec.spec.attacher of type string`,
  );
  assert.equal(
    failure("application/json", va("s")).message,
    `${prefix}string into Go struct field VolumeAttachment.spec of type v1.VolumeAttachmentSpec`,
  );
  assert.equal(
    failure("application/json", va({}, { name: 5 })).message,
    `${prefix}number into Go struct field ObjectMeta.metadata.name of type string`,
  );
  // A map value is reported at the map: YAML `yes` is a bool, 0x1F a number.
  for (const value of ["yes", "0x1F"]) {
    const text = `kind: VolumeAttachment\nmetadata:\n  name: x\n  labels:\n    a: ${value}\n`;
    assert.match(
      failure("application/yaml", text).message,
      /^VolumeAttachment in version "v1" cannot be handled as a VolumeAttachment: json: cannot unmarshal (bool|number) into Go struct field ObjectMeta\.metadata\.labels of type string$/,
    );
  }
  // The first wrong value wins, even with fieldValidation=Strict and unknown fields about.
  assert.equal(
    failure("application/json", va({ bogus: 1, nodeName: true, attacher: 5 }), "Strict").message,
    `${prefix}bool into Go struct field VolumeAttachmentSpec.spec.nodeName of type string`,
  );
  // null fits every type; status and finalizers are typed too.
  assert.deepEqual(
    decodeObjectBody(VA, "application/json", va({ attacher: null }), "").body.spec,
    { attacher: null },
  );
  assert.equal(
    failure(
      "application/json",
      JSON.stringify({ metadata: { finalizers: "f" }, status: { attached: "yes" } }),
    ).message,
    `${prefix}string into Go struct field ObjectMeta.metadata.finalizers of type []string`,
  );
  assert.equal(
    failure("application/json", JSON.stringify({ status: { attachError: { errorCode: 1.5 } } }))
      .message,
    `${prefix}number 1.5 into Go struct field VolumeError.status.attachError.errorCode of type int32`,
  );
});
