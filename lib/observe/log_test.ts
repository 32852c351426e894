import assert from "node:assert/strict";
import { FakeClock } from "../../testkit/fakes/fake_clock.ts";
import { errorText } from "../errors.ts";
import { createLogger, type LoggerOptions } from "./log.ts";

/** 2025-11-21 22:30:01.123456 UTC, in milliseconds. */
const T0 = Date.UTC(2025, 10, 21, 22, 30, 1, 123) + 0.456;

/** A logger that records its lines, with a fixed clock, pid and UTC time. */
function recorder(options: Partial<LoggerOptions> = {}) {
  const lines: string[] = [];
  const log = createLogger({
    verbosity: 0,
    format: "text",
    write: (line) => lines.push(line),
    clock: new FakeClock(T0),
    pid: 1234,
    utc: true,
    ...options,
  });
  return { log, lines };
}

Deno.test("createLogger() text info line has klog's header, quoted message and fields", () => {
  const { log, lines } = recorder();
  log.info("Attached", { volumeAttachment: "va1", node: "n1" });
  assert.deepEqual(lines, [
    'I1121 22:30:01.123456    1234 attacher] "Attached" volumeAttachment="va1" node="n1"',
  ]);
});

Deno.test("createLogger() text error line has E severity and err right after the message", () => {
  const { log, lines } = recorder();
  log.with({ driver: "csi/test" }).error(new Error("boom"), "Failed to attach", { node: "n1" });
  assert.deepEqual(lines, [
    'E1121 22:30:01.123456    1234 attacher] "Failed to attach" err="boom" driver="csi/test" ' +
    'node="n1"',
  ]);
});

Deno.test("createLogger() text error line without an error value has no err field", () => {
  const { log, lines } = recorder();
  log.error(undefined, "Option -worker-threads must be greater than zero");
  log.error(null, "x");
  assert.equal(
    lines[0],
    'E1121 22:30:01.123456    1234 attacher] "Option -worker-threads must be greater than zero"',
  );
  assert.ok(!lines[1]!.includes("err="));
});

Deno.test("createLogger() text renders non-string values as compact JSON", () => {
  const { log, lines } = recorder();
  log.info("Values", {
    count: 5,
    ok: true,
    nothing: null,
    missing: undefined,
    ref: { name: "va1", namespace: "" },
    list: [1, "two"],
    big: 12345678901234567890n,
    err: new Error("inner"),
    quote: 'say "hi"\n',
  });
  assert.equal(
    lines[0],
    'I1121 22:30:01.123456    1234 attacher] "Values" count=5 ok=true nothing=null ' +
      'missing=null ref={"name":"va1","namespace":""} list=[1,"two"] big="12345678901234567890" ' +
      'err="inner" quote="say \\"hi\\"\\n"',
  );
});

Deno.test("createLogger() text pads the pid to 7 columns and uses the component name", () => {
  const { log, lines } = recorder({ pid: 7, component: "csi-attacher" });
  log.info("x");
  assert.equal(lines[0], 'I1121 22:30:01.123456       7 csi-attacher] "x"');
});

Deno.test("createLogger() text time is local by default", () => {
  const { log, lines } = recorder({ utc: false });
  log.info("x");
  const d = new Date(Math.floor(T0));
  const two = (n: number) => String(n).padStart(2, "0");
  const expected = `I${two(d.getMonth() + 1)}${two(d.getDate())} ${two(d.getHours())}:${
    two(d.getMinutes())
  }:${two(d.getSeconds())}.123456`;
  assert.ok(lines[0]!.startsWith(expected), `${lines[0]} !~ ${expected}`);
});

Deno.test("createLogger() json info line has ts in epoch ms, caller, msg, v then fields", () => {
  const { log, lines } = recorder({ format: "json", verbosity: 4 });
  log.info("Started");
  log.with({ volumeAttachment: "va1" }).v(4).info("Attached", { attached: true });
  assert.deepEqual(lines.map((l) => JSON.parse(l)), [
    { ts: T0, caller: "attacher", msg: "Started", v: 0 },
    { ts: T0, caller: "attacher", msg: "Attached", volumeAttachment: "va1", v: 4, attached: true },
  ]);
  // component-base's order (zapr): the with() fields before v, the call's after it.
  assert.equal(
    lines[1]!,
    `{"ts":${T0},"caller":"attacher","msg":"Attached","volumeAttachment":"va1","v":4,"attached":true}`,
  );
});

Deno.test("createLogger() json error line has no v and ends with err", () => {
  const { log, lines } = recorder({ format: "json" });
  log.error(new Error("rpc error: code = DeadlineExceeded"), "Attach failed", { node: "n1" });
  assert.equal(
    lines[0]!,
    `{"ts":${T0},"caller":"attacher","msg":"Attach failed","node":"n1","err":"rpc error: code = DeadlineExceeded"}`,
  );
  log.error(undefined, "No error value");
  assert.deepEqual(JSON.parse(lines[1]!), { ts: T0, caller: "attacher", msg: "No error value" });
});

Deno.test("createLogger() a call field overrides a with() field in the call's place", () => {
  const { log, lines } = recorder({ format: "json" });
  log.with({ a: 1, b: 2 }).info("M", { a: 3 });
  assert.equal(lines[0]!, `{"ts":${T0},"caller":"attacher","msg":"M","b":2,"v":0,"a":3}`);
});

Deno.test("createLogger() on the real clock writes microseconds, in both formats", () => {
  const text: string[] = [];
  const json: string[] = [];
  const textLog = createLogger({ verbosity: 0, format: "text", write: (l) => text.push(l) });
  const jsonLog = createLogger({ verbosity: 0, format: "json", write: (l) => json.push(l) });
  for (let i = 0; i < 20; i++) {
    textLog.info("tick");
    jsonLog.info("tick");
  }
  // Date.now() alone gives whole milliseconds: `.123000` in every text line.
  const micros = text.map((l) => /^I\d{4} \d\d:\d\d:\d\d\.\d{3}(\d{3}) /.exec(l)![1]);
  assert.ok(micros.some((m) => m !== "000"), text.join("\n"));
  const ts = json.map((l) => JSON.parse(l).ts as number);
  assert.ok(ts.some((t) => !Number.isInteger(t)), json.join("\n"));
  // Epoch milliseconds, not seconds: within a minute of Date.now().
  assert.ok(Math.abs(ts[0]! - Date.now()) < 60_000, String(ts[0]));
  for (let i = 1; i < ts.length; i++) assert.ok(ts[i]! >= ts[i - 1]!, "went back");
});

Deno.test("createLogger() json keeps objects nested and values whole", () => {
  const { log, lines } = recorder({ format: "json" });
  const long = "x".repeat(100_000);
  log.info("Big", { pv: { name: "pv1", spec: { csi: { driver: "d" } } }, long });
  const parsed = JSON.parse(lines[0]!);
  assert.deepEqual(parsed.pv, { name: "pv1", spec: { csi: { driver: "d" } } });
  assert.equal(parsed.long.length, 100_000);
  assert.equal(lines.length, 1);
});

Deno.test("createLogger() text does not truncate a very long value", () => {
  const { log, lines } = recorder();
  log.info("Big", { long: "y".repeat(70_000) });
  assert.ok(lines[0]!.endsWith(`long="${"y".repeat(70_000)}"`));
});

Deno.test("createLogger() filters v(n) lines by verbosity", () => {
  const { log, lines } = recorder({ verbosity: 2 });
  log.v(1).info("one");
  log.v(2).info("two");
  log.v(3).info("three");
  log.with({ a: 1 }).v(5).info("five");
  log.error(new Error("e"), "errors always");
  assert.deepEqual(lines.map((l) => l.slice(l.indexOf("]") + 2)), [
    '"one"',
    '"two"',
    '"errors always" err="e"',
  ]);
  assert.equal(log.enabled(2), true);
  assert.equal(log.enabled(3), false);
  assert.equal(log.with({}).enabled(0), true);
});

Deno.test("createLogger() v(n) above the verbosity formats nothing and allocates no logger", () => {
  const { log, lines } = recorder({ verbosity: 2 });
  let read = false;
  const fields = {
    get value() {
      read = true;
      return "x";
    },
  };
  log.v(3).info("three", fields);
  log.with({ a: 1 }).v(4).info("four", fields);
  assert.deepEqual(lines, []);
  assert.equal(read, false, "the fields of a line that is off are not read");
  assert.equal(log.v(3), log.with({ b: 2 }).v(7), "one shared no-op for every level that is off");
  assert.notEqual(log.v(2), log.v(2), "a level that is on logs with the logger's fields");
});

Deno.test("createLogger() with() children add fields; call fields override them", () => {
  const { log, lines } = recorder();
  const child = log.with({ driver: "d", node: "old" });
  const grandchild = child.with({ volumeAttachment: "va1" });
  grandchild.info("x", { node: "new" });
  child.info("y");
  log.info("z");
  assert.deepEqual(lines.map((l) => l.slice(l.indexOf("]") + 2)), [
    '"x" driver="d" node="new" volumeAttachment="va1"',
    '"y" driver="d" node="old"',
    '"z"',
  ]);
});

Deno.test("createLogger() never throws on cyclic or odd values", () => {
  const { log, lines } = recorder({ format: "json" });
  const cyclic: Record<string, unknown> = { name: "c" };
  cyclic.self = cyclic;
  const badJson = {
    toJSON() {
      throw new Error("nope");
    },
  };
  log.info("Odd", {
    cyclic,
    badJson,
    map: new Map([["k", 1]]),
    set: new Set(["a"]),
    date: new Date(0),
    fn: () => 1,
    nan: NaN,
    bytes: new Uint8Array(3),
  });
  assert.deepEqual(JSON.parse(lines[0]!), {
    ts: T0,
    caller: "attacher",
    v: 0,
    msg: "Odd",
    cyclic: { name: "c", self: "[Circular]" },
    badJson: "[toJSON failed: nope]",
    map: { k: 1 },
    set: ["a"],
    date: "1970-01-01T00:00:00.000Z",
    fn: "[Function fn]",
    nan: "NaN",
    bytes: "[Uint8Array 3 bytes]",
  });
});

Deno.test("errorText() appends a cause only when the message does not contain it", () => {
  assert.equal(
    errorText(new Error("could not save VolumeAttachment", { cause: new Error("forbidden") })),
    "could not save VolumeAttachment: forbidden",
  );
  assert.equal(
    errorText(
      new Error("could not save VolumeAttachment: forbidden", {
        cause: new Error("forbidden"),
      }),
    ),
    "could not save VolumeAttachment: forbidden",
  );
  assert.equal(
    errorText(new Error("a", { cause: new Error("b", { cause: new Error("c") }) })),
    "a: b: c",
  );
  assert.equal(errorText(new Error("a", { cause: "text cause" })), "a: text cause");
  assert.equal(errorText("plain"), "plain");
  assert.equal(errorText({ message: "like an error" }), "like an error");
  assert.equal(errorText({ code: 5 }), '{"code":5}');
  assert.equal(errorText(42), "42");
  assert.equal(errorText(new TypeError("")), "TypeError");
});

Deno.test("errorText() stops on a cyclic cause chain", () => {
  const a = new Error("a");
  const b = new Error("b", { cause: a });
  (a as { cause?: unknown }).cause = b;
  assert.equal(errorText(a), "a: b");
});

Deno.test("createLogger() rejects a bad format or verbosity", () => {
  assert.throws(
    () => createLogger({ verbosity: 0, format: "xml" as "text", write: () => {} }),
    RangeError,
  );
  assert.throws(
    () => createLogger({ verbosity: NaN, format: "text", write: () => {} }),
    RangeError,
  );
});

Deno.test("createLogger() writes to stderr by default", async () => {
  const code = `
    import { createLogger } from ${JSON.stringify(new URL("./log.ts", import.meta.url).href)};
    const log = createLogger({ verbosity: 0, format: "json" });
    log.info("to stderr", { a: 1 });
    log.error(new Error("e"), "also stderr");
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", code],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(new TextDecoder().decode(out.stdout), "");
  const lines = new TextDecoder().decode(out.stderr).trimEnd().split("\n").map((l) =>
    JSON.parse(l)
  );
  assert.deepEqual(lines.map((l) => l.msg), ["to stderr", "also stderr"]);
  assert.equal(lines[0].a, 1);
});
