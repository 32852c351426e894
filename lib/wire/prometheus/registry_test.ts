import assert from "node:assert/strict";
import { Counter, Gauge, Histogram, Registry, TEXT_CONTENT_TYPE } from "./registry.ts";

/**
 * The label values of a sample line as a reader of the text format gets them back: `\\`, `\"`
 * and `\n` undone, and nothing else escaped.
 */
function parseLabels(line: string): [string, string][] {
  const body = /^[a-zA-Z_:][a-zA-Z0-9_:]*\{(.*)\} \S+$/.exec(line)?.[1];
  assert.ok(body !== undefined, `no labels in ${line}`);
  const out: [string, string][] = [];
  const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/gy;
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = re.exec(body)) !== null) {
    out.push([m[1]!, m[2]!.replace(/\\([\\"n])/g, (_, c) => c === "n" ? "\n" : c)]);
    end = re.lastIndex;
    if (m[3] === "") break;
  }
  assert.equal(end, body.length, `malformed labels in ${line}`);
  return out;
}

Deno.test("Registry writes families sorted by name, labels sorted with le last, no blank lines", () => {
  const registry = new Registry();
  const h = new Histogram({
    name: "b_seconds",
    help: "A histogram.",
    labelNames: ["zone", "app"],
    buckets: [0.5, 1, 2],
    registry,
  });
  const c = new Counter({
    name: "a_total",
    help: "A counter.",
    labelNames: ["code", "method"],
    registry,
  });
  const g = new Gauge({ name: "c_value", help: "A gauge.", registry });
  g.set({}, 7.25);
  c.inc({ method: "GET", code: "200" });
  c.inc({ method: "GET", code: "200" }, 2);
  h.observe({ zone: "z1", app: "x" }, 0.5); // on a bound: counted in that bucket
  h.observe({ zone: "z1", app: "x" }, 1.5);
  h.observe({ zone: "z1", app: "x" }, 3); // above every bound: only in +Inf
  assert.equal(
    registry.metricsText(),
    [
      "# HELP a_total A counter.",
      "# TYPE a_total counter",
      'a_total{code="200",method="GET"} 3',
      "# HELP b_seconds A histogram.",
      "# TYPE b_seconds histogram",
      'b_seconds_bucket{app="x",zone="z1",le="0.5"} 1',
      'b_seconds_bucket{app="x",zone="z1",le="1"} 1',
      'b_seconds_bucket{app="x",zone="z1",le="2"} 2',
      'b_seconds_bucket{app="x",zone="z1",le="+Inf"} 3',
      'b_seconds_sum{app="x",zone="z1"} 5',
      'b_seconds_count{app="x",zone="z1"} 3',
      "# HELP c_value A gauge.",
      "# TYPE c_value gauge",
      "c_value 7.25",
      "",
    ].join("\n"),
  );
  assert.equal(registry.contentType, "text/plain; version=0.0.4; charset=utf-8");
  assert.equal(registry.contentType, TEXT_CONTENT_TYPE);
});

Deno.test("Histogram buckets are cumulative and +Inf is the count, per series", () => {
  const registry = new Registry();
  const h = new Histogram({
    name: "d",
    help: "h",
    labelNames: ["k"],
    buckets: [1, 2, 4, 8],
    registry,
  });
  for (const v of [0, 1, 1.0000001, 3, 3, 4, 100, -5]) h.observe({ k: "a" }, v);
  h.observe({ k: "b" }, 8);
  const lines = registry.metricsText().split("\n");
  const values = (k: string, suffix: string) =>
    lines.filter((l) => l.startsWith(`d_${suffix}{k="${k}"`)).map((l) => l.split(" ")[1]);
  assert.deepEqual(values("a", "bucket"), ["3", "4", "7", "7", "8"]);
  assert.deepEqual(values("a", "sum"), [String(0 + 1 + 1.0000001 + 3 + 3 + 4 + 100 - 5)]);
  assert.deepEqual(values("a", "count"), ["8"]);
  assert.deepEqual(values("b", "bucket"), ["0", "0", "0", "1", "1"]);
});

Deno.test("addFrom() adds another histogram's series under an extra label; unregister() frees the name", () => {
  const registry = new Registry();
  const before = new Histogram({
    name: "d",
    help: "h",
    labelNames: ["k"],
    buckets: [1, 2],
    registry,
  });
  before.observe({ k: "a" }, 0.5);
  before.observe({ k: "a" }, 3);
  before.observe({ k: "b" }, 2);
  assert.throws(() => new Histogram({ name: "d", help: "h", buckets: [1, 2], registry }));
  assert.equal(registry.unregister("d"), true);
  assert.equal(registry.unregister("d"), false);
  assert.equal(registry.metricsText(), "");
  const after = new Histogram({
    name: "d",
    help: "h",
    labelNames: ["k", "x"],
    buckets: [1, 2],
    registry,
  });
  after.observe({ k: "a", x: "no" }, 1.5);
  after.addFrom(before, { x: "no" });
  assert.deepEqual(registry.metricsText().split("\n").filter((l) => l.startsWith("d_")), [
    'd_bucket{k="a",x="no",le="1"} 1',
    'd_bucket{k="a",x="no",le="2"} 2',
    'd_bucket{k="a",x="no",le="+Inf"} 3',
    'd_sum{k="a",x="no"} 5',
    'd_count{k="a",x="no"} 3',
    'd_bucket{k="b",x="no",le="1"} 0',
    'd_bucket{k="b",x="no",le="2"} 1',
    'd_bucket{k="b",x="no",le="+Inf"} 1',
    'd_sum{k="b",x="no"} 2',
    'd_count{k="b",x="no"} 1',
  ]);
  // What the source observes later is its own; other buckets or labels are refused.
  before.observe({ k: "a" }, 0);
  assert.match(registry.metricsText(), /^d_count\{k="a",x="no"\} 3$/m);
  const other = new Histogram({ name: "e", help: "h", buckets: [1, 3], registry: new Registry() });
  assert.throws(() => after.addFrom(other), /their buckets differ/);
  assert.throws(() => after.addFrom(before), /has labels \[k, x\], not \[k\]/);
});

Deno.test("a series exists from labels() on, at 0; a vector with no series writes nothing", () => {
  const registry = new Registry();
  const used = new Counter({ name: "used_total", help: "u", labelNames: ["name"], registry });
  new Gauge({ name: "unused", help: "never set", labelNames: ["name"], registry });
  const hist = new Histogram({
    name: "h",
    help: "h",
    labelNames: ["name"],
    buckets: [1],
    registry,
  });
  assert.equal(registry.metricsText(), "");
  used.labels({ name: "q" });
  hist.labels({ name: "q" });
  assert.equal(
    registry.metricsText(),
    [
      "# HELP h h",
      "# TYPE h histogram",
      'h_bucket{name="q",le="1"} 0',
      'h_bucket{name="q",le="+Inf"} 0',
      'h_sum{name="q"} 0',
      'h_count{name="q"} 0',
      "# HELP used_total u",
      "# TYPE used_total counter",
      'used_total{name="q"} 0',
      "",
    ].join("\n"),
  );
});

Deno.test("children update their own series", () => {
  const registry = new Registry();
  const g = new Gauge({ name: "g", help: "g", labelNames: ["name"], registry });
  const c = new Counter({ name: "c", help: "c", labelNames: ["name"], registry });
  const h = new Histogram({ name: "h", help: "h", labelNames: ["name"], buckets: [1], registry });
  const ga = g.labels({ name: "a" });
  const gb = g.labels({ name: "b" });
  ga.inc();
  ga.inc();
  gb.dec();
  gb.set(5);
  ga.dec(0.5);
  c.labels({ name: "a" }).inc();
  c.labels({ name: "a" }).inc(2);
  h.labels({ name: "a" }).observe(0.5);
  const text = registry.metricsText();
  assert.match(text, /^g\{name="a"\} 1.5$/m);
  assert.match(text, /^g\{name="b"\} 5$/m);
  assert.match(text, /^c\{name="a"\} 3$/m);
  assert.match(text, /^h_count\{name="a"\} 1$/m);
});

Deno.test("series are written in the order of their label values, not of their creation", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c", help: "c", labelNames: ["b", "a"], registry });
  for (const [a, b] of [["2", "x"], ["10", "y"], ["1", "z"], ["1", "a"]]) c.inc({ a: a!, b: b! });
  assert.deepEqual(registry.metricsText().split("\n").filter((l) => l.startsWith("c{")), [
    'c{a="1",b="a"} 1',
    'c{a="1",b="z"} 1',
    'c{a="10",b="y"} 1',
    'c{a="2",b="x"} 1',
  ]);
});

Deno.test("series whose label values would run together stay apart", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c", help: "c", labelNames: ["a", "b"], registry });
  const pairs = [["x,y", "z"], ["x", "y,z"], ["1:x", ""], ["1", "x"], ["", "1:x"], ["x\0", "y"]];
  for (const [a, b] of pairs) c.inc({ a: a!, b: b! });
  c.inc({ a: "x", b: "y,z" });
  const text = registry.metricsText();
  assert.equal(text.split("\n").filter((l) => l.startsWith("c{")).length, pairs.length, text);
  assert.match(text, /^c\{a="x",b="y,z"\} 2$/m);
  assert.match(text, /^c\{a="x,y",b="z"\} 1$/m);
});

Deno.test("label values escape backslash, quote and newline, and read back unchanged", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c", help: "c", labelNames: ["v"], registry });
  const values = ['a"b', "back\\slash", "line\nbreak", '\\"\n', "tab\tand ünïcode {},=", ""];
  for (const v of values) c.inc({ v });
  const lines = registry.metricsText().split("\n").filter((l) => l.startsWith("c{"));
  assert.equal(lines.length, values.length, "one line each: no raw newline in a value");
  assert.ok(lines.includes('c{v="a\\"b"} 1'), lines.join("\n"));
  assert.ok(lines.includes('c{v="back\\\\slash"} 1'), lines.join("\n"));
  assert.ok(lines.includes('c{v="line\\nbreak"} 1'), lines.join("\n"));
  assert.ok(lines.includes('c{v="\\\\\\"\\n"} 1'), lines.join("\n"));
  assert.ok(lines.includes('c{v="tab\tand ünïcode {},="} 1'), lines.join("\n"));
  assert.deepEqual(
    lines.map((l) => parseLabels(l)[0]![1]).sort(),
    [...values].sort(),
  );
  c.inc({ v: "plain" });
  assert.match(registry.metricsText(), /^c\{v="plain"\} 1$/m, "a plain value is written as it is");
});

Deno.test("help text escapes backslash and newline but not quotes", () => {
  const registry = new Registry();
  new Gauge({ name: "g", help: 'say "hi"\\n\nnext', registry }).set({}, 1);
  assert.equal(
    registry.metricsText().split("\n")[0],
    '# HELP g say "hi"\\\\n\\nnext',
  );
});

Deno.test("NaN and infinities are written NaN, +Inf and -Inf; finite numbers as JavaScript writes them", () => {
  const registry = new Registry();
  const g = new Gauge({ name: "g", help: "g", labelNames: ["k"], registry });
  const cases: [string, number, string][] = [
    ["a", NaN, "NaN"],
    ["b", Infinity, "+Inf"],
    ["c", -Infinity, "-Inf"],
    ["d", 1e-7, "1e-7"],
    ["e", 0.000001, "0.000001"],
    ["f", 1712345678.5, "1712345678.5"],
    ["g", 1e21, "1e+21"],
    ["h", -2.5, "-2.5"],
    ["i", 0.1 + 0.2, "0.30000000000000004"],
  ];
  for (const [k, v] of cases) g.set({ k }, v);
  const text = registry.metricsText();
  for (const [k, , written] of cases) {
    assert.ok(text.includes(`\ng{k="${k}"} ${written}\n`), `${k}: ${written} in\n${text}`);
  }
  g.set({ k: "z" }, -0);
  assert.match(registry.metricsText(), /^g\{k="z"\} 0$/m, "-0 is written 0");
  const h = new Histogram({ name: "h", help: "h", buckets: [1e-8, 0.000001, 10], registry });
  h.labels().observe(5);
  assert.match(registry.metricsText(), /^h_bucket\{le="1e-8"\} 0\nh_bucket\{le="0.000001"\} 0$/m);
});

Deno.test("a gauge's collect hook runs at each scrape, before the gauge is written", () => {
  const registry = new Registry();
  let scrapes = 0;
  new Gauge({
    name: "scrapes",
    help: "s",
    labelNames: ["k"],
    registry,
    collect(gauge) {
      scrapes++;
      gauge.set({ k: "n" }, scrapes);
    },
  });
  assert.match(registry.metricsText(), /^scrapes\{k="n"\} 1$/m);
  assert.match(registry.metricsText(), /^scrapes\{k="n"\} 2$/m);
});

Deno.test("misuse is an error: wrong labels, bad values, bad buckets, names, duplicates", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c_total", help: "c", labelNames: ["a", "b"], registry });
  assert.throws(() => c.inc({ a: "1" }), /Metric c_total has labels \[a, b\], not \[a\]/);
  assert.throws(() => c.inc({ a: "1", b: "2", x: "3" }), /has labels \[a, b\]/);
  assert.throws(() => c.inc({ a: "1", x: "2" }), /has labels \[a, b\]/);
  assert.throws(() => c.inc({ a: "1", b: "2" }, -1), RangeError);
  assert.throws(() => c.inc({ a: "1", b: "2" }, NaN), RangeError);
  assert.throws(() => c.labels({ a: "1", b: "2" }).inc(Infinity), RangeError);
  assert.doesNotMatch(registry.metricsText(), /c_total\{a="1",b="2"\} [^0]/, "nothing counted");

  const h = new Histogram({ name: "h", help: "h", buckets: [1], registry });
  assert.throws(() => h.observe({}, NaN), RangeError);
  assert.throws(() => h.labels().observe(Infinity), RangeError);
  assert.match(registry.metricsText(), /^h_count 0$/m);

  assert.throws(() => new Counter({ name: "c_total", help: "again", registry }), /registered/);
  assert.throws(() => new Gauge({ name: "1bad", help: "x", registry }), /Invalid metric name/);
  assert.throws(
    () => new Gauge({ name: "g", help: "x", labelNames: ["le"], registry }),
    /Invalid label name le/,
  );
  assert.throws(
    () => new Gauge({ name: "g2", help: "x", labelNames: ["__x"], registry }),
    /Invalid label name/,
  );
  assert.throws(
    () => new Gauge({ name: "g3", help: "x", labelNames: ["a", "a"], registry }),
    /Duplicate label name a/,
  );
  for (const buckets of [[1, 1], [2, 1], [1, Infinity], [NaN]]) {
    assert.throws(
      () => new Histogram({ name: `h${buckets.length}x`, help: "x", buckets, registry }),
      /finite and strictly increasing/,
    );
  }
});

Deno.test("a three-label series is found again whatever the order of its labels; one differing value is another series", () => {
  const registry = new Registry();
  const c = new Counter({ name: "c", help: "c", labelNames: ["verb", "code", "host"], registry });
  c.inc({ code: "200", host: "h", verb: "PATCH" });
  c.inc({ verb: "PATCH", host: "h", code: "200" });
  c.labels({ host: "h", verb: "PATCH", code: "200" }).inc(3);
  c.inc({ code: "200", host: "h", verb: "GET" });
  c.inc({ code: "404", host: "h", verb: "PATCH" });
  c.inc({ code: "200", host: "h2", verb: "PATCH" });
  const lines = registry.metricsText().split("\n").filter((l) => l.startsWith("c{"));
  assert.deepEqual(lines, [
    'c{code="200",host="h",verb="GET"} 1',
    'c{code="200",host="h",verb="PATCH"} 5',
    'c{code="200",host="h2",verb="PATCH"} 1',
    'c{code="404",host="h",verb="PATCH"} 1',
  ]);
  // A refused label set leaves no series behind.
  assert.throws(() => c.inc({ code: "500", host: "h" }));
  assert.throws(() => c.inc({ code: "500", host: "h", verb: 1 as unknown as string }));
  const gauge = new Gauge({ name: "g", help: "g", registry });
  gauge.set({}, 2);
  gauge.labels().set(3);
  const text = registry.metricsText();
  assert.equal(text.split("\n").filter((l) => l.startsWith("c{")).length, 4, text);
  assert.match(text, /^g 3$/m);
});
