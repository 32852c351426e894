import assert from "node:assert/strict";
import { CLASSIFIED, FlagError, FlagSet, parseGoBool } from "./flags.ts";

/** A small flag set with one flag of every kind. */
function sample() {
  const fs = new FlagSet({ name: "prog" });
  return {
    fs,
    address: fs.string("csi-address", "/run/csi/socket", "Address of the CSI driver socket."),
    leader: fs.bool("leader-election", false, "Enable leader election."),
    burst: fs.int("kube-api-burst", 10, "Burst."),
    workers: fs.uint("worker-threads", 10, "Number of worker threads"),
    qps: fs.float("kube-api-qps", 5, "QPS."),
    timeout: fs.duration("timeout", 15_000, "Timeout."),
    labels: fs.custom<Record<string, string>>("labels", {}, "Labels k:v.", {
      parse: (text, current) => {
        const [k, v, ...extra] = text.split(":");
        if (v === undefined || extra.length > 0) throw new Error(`malformed item: ${text}`);
        return { ...current, [k!]: v };
      },
    }),
  };
}

/** Asserts that parsing `args` throws a FlagError with `message`. */
function assertFlagError(fs: FlagSet, args: string[], message: string): void {
  assert.throws(() => fs.parse(args), (err: unknown) => {
    assert.ok(err instanceof FlagError, `not a FlagError: ${err}`);
    assert.equal(err.message, message);
    return true;
  });
}

Deno.test("FlagSet.parse() keeps the defaults when no flag is given", () => {
  const f = sample();
  assert.deepEqual(f.fs.parse([]), { helpRequested: false, args: [] });
  assert.equal(f.address.value, "/run/csi/socket");
  assert.equal(f.leader.value, false);
  assert.equal(f.burst.value, 10);
  assert.equal(f.workers.value, 10);
  assert.equal(f.qps.value, 5);
  assert.equal(f.timeout.value, 15_000);
  assert.deepEqual(f.labels.value, {});
  assert.equal(f.address.isSet, false);
});

Deno.test("FlagSet.parse() treats one and two dashes, =value and separate value alike", () => {
  for (
    const args of [
      ["-csi-address=/csi/csi.sock"],
      ["--csi-address=/csi/csi.sock"],
      ["-csi-address", "/csi/csi.sock"],
      ["--csi-address", "/csi/csi.sock"],
    ]
  ) {
    const f = sample();
    f.fs.parse(args);
    assert.equal(f.address.value, "/csi/csi.sock", args.join(" "));
    assert.equal(f.address.isSet, true);
  }
});

Deno.test("FlagSet.parse() takes a separate value even when it looks like a flag", () => {
  const f = sample();
  f.fs.parse(["--csi-address", "--timeout=1s"]);
  assert.equal(f.address.value, "--timeout=1s");
  assert.equal(f.timeout.value, 15_000);
});

Deno.test("FlagSet.parse() keeps everything after the first = in the value", () => {
  const f = sample();
  f.fs.parse(["--csi-address=a=b=c", "-csi-address="]);
  assert.equal(f.address.value, "");
  const g = sample();
  g.fs.parse(["--csi-address=a=b=c"]);
  assert.equal(g.address.value, "a=b=c");
});

Deno.test("FlagSet.parse() lets the last occurrence of a flag win", () => {
  const f = sample();
  f.fs.parse(["--timeout=1s", "-timeout", "2s"]);
  assert.equal(f.timeout.value, 2_000);
});

Deno.test("FlagSet.parse() sets a bare bool flag to true", () => {
  for (const arg of ["-leader-election", "--leader-election"]) {
    const f = sample();
    f.fs.parse([arg]);
    assert.equal(f.leader.value, true);
  }
});

Deno.test("FlagSet.parse() reads every strconv.ParseBool spelling after =", () => {
  for (const text of ["1", "t", "T", "TRUE", "true", "True"]) {
    const f = sample();
    f.fs.parse([`--leader-election=${text}`]);
    assert.equal(f.leader.value, true, text);
  }
  for (const text of ["0", "f", "F", "FALSE", "false", "False"]) {
    const f = sample();
    f.fs.parse(["--leader-election", `--leader-election=${text}`]);
    assert.equal(f.leader.value, false, text);
  }
});

Deno.test("FlagSet.parse() treats `--leader-election false` as true plus a first non-flag argument", () => {
  const f = sample();
  const result = f.fs.parse(["--leader-election", "false", "--timeout=1s"]);
  assert.equal(f.leader.value, true);
  assert.deepEqual(result, { helpRequested: false, args: ["false", "--timeout=1s"] });
  assert.equal(f.timeout.value, 15_000, "flags after the first non-flag argument are not parsed");
});

Deno.test("FlagSet.parse() rejects a bad bool value with Go's message", () => {
  assertFlagError(
    sample().fs,
    ["--leader-election=yes"],
    'invalid boolean value "yes" for -leader-election: parse error',
  );
  assertFlagError(
    sample().fs,
    ["--leader-election="],
    'invalid boolean value "" for -leader-election: parse error',
  );
});

Deno.test("FlagSet.parse() stops at `--` and returns what follows", () => {
  const f = sample();
  const result = f.fs.parse(["-timeout=2s", "--", "-leader-election", "x"]);
  assert.deepEqual(result, { helpRequested: false, args: ["-leader-election", "x"] });
  assert.equal(f.timeout.value, 2_000);
  assert.equal(f.leader.value, false);
});

Deno.test("FlagSet.parse() stops at the first non-flag, including a lone -", () => {
  const f = sample();
  assert.deepEqual(f.fs.parse(["-leader-election", "-", "-timeout=1s"]), {
    helpRequested: false,
    args: ["-", "-timeout=1s"],
  });
  assert.deepEqual(sample().fs.parse(["run", "--leader-election"]), {
    helpRequested: false,
    args: ["run", "--leader-election"],
  });
  assert.deepEqual(sample().fs.parse(["", "-x"]), { helpRequested: false, args: ["", "-x"] });
});

Deno.test("FlagSet.parse() reports an unknown flag with Go's message", () => {
  assertFlagError(sample().fs, ["--bogus"], "flag provided but not defined: -bogus");
  assertFlagError(sample().fs, ["-bogus=1"], "flag provided but not defined: -bogus");
  assertFlagError(sample().fs, ["-CSI-ADDRESS=x"], "flag provided but not defined: -CSI-ADDRESS");
});

Deno.test("FlagSet.parse() reports a missing argument with Go's message", () => {
  assertFlagError(sample().fs, ["--csi-address"], "flag needs an argument: -csi-address");
  assertFlagError(sample().fs, ["-timeout"], "flag needs an argument: -timeout");
});

Deno.test("FlagSet.parse() reports bad flag syntax with Go's message", () => {
  assertFlagError(sample().fs, ["---x"], "bad flag syntax: ---x");
  assertFlagError(sample().fs, ["-=x"], "bad flag syntax: -=x");
  assertFlagError(sample().fs, ["--=x"], "bad flag syntax: --=x");
});

Deno.test("FlagSet.parse() keeps values set before an error", () => {
  const f = sample();
  assert.throws(() => f.fs.parse(["--timeout=3s", "--bogus"]), FlagError);
  assert.equal(f.timeout.value, 3_000);
});

Deno.test("FlagSet.parse() reports -h, -help and --help as a help request", () => {
  for (const arg of ["-h", "--h", "-help", "--help", "--help=1"]) {
    assert.deepEqual(sample().fs.parse(["-timeout=1s", arg, "--bogus"]), { helpRequested: true });
  }
});

Deno.test("FlagSet.parse() uses a defined help flag like any other flag", () => {
  const fs = new FlagSet({ name: "p" });
  const help = fs.bool("help", false, "Show help.");
  assert.deepEqual(fs.parse(["--help"]), { helpRequested: false, args: [] });
  assert.equal(help.value, true);
  assert.deepEqual(
    fs.parse(["-h"]),
    { helpRequested: true },
    "an undefined -h still asks for help",
  );
});

Deno.test("FlagSet.parse() reads durations in Go syntax", () => {
  for (
    const [text, ms] of [["1m30s", 90_000], ["300ms", 300], ["2h45m", 9_900_000], ["0", 0], [
      "-1s",
      -1_000,
    ]] as const
  ) {
    const f = sample();
    f.fs.parse([`--timeout=${text}`]);
    assert.equal(f.timeout.value, ms, text);
  }
});

Deno.test("FlagSet.parse() rejects bad values of every kind with Go's messages", () => {
  const cases: Array<[string[], string]> = [
    [["--timeout=abc"], 'invalid value "abc" for flag -timeout: parse error'],
    [["--timeout", "15"], 'invalid value "15" for flag -timeout: parse error'],
    [["--kube-api-burst=ten"], 'invalid value "ten" for flag -kube-api-burst: parse error'],
    [["--kube-api-burst=1.5"], 'invalid value "1.5" for flag -kube-api-burst: parse error'],
    [
      ["--kube-api-burst=9223372036854775808"],
      'invalid value "9223372036854775808" for flag -kube-api-burst: value out of range',
    ],
    [["--worker-threads=-1"], 'invalid value "-1" for flag -worker-threads: parse error'],
    [["--worker-threads=+1"], 'invalid value "+1" for flag -worker-threads: parse error'],
    [["--worker-threads="], 'invalid value "" for flag -worker-threads: parse error'],
    [
      ["--worker-threads=18446744073709551616"],
      'invalid value "18446744073709551616" for flag -worker-threads: value out of range',
    ],
    [["--kube-api-qps=fast"], 'invalid value "fast" for flag -kube-api-qps: parse error'],
    [["--kube-api-qps=1e400"], 'invalid value "1e400" for flag -kube-api-qps: value out of range'],
    [["--kube-api-qps=0x10"], 'invalid value "0x10" for flag -kube-api-qps: parse error'],
    [["--labels=a:b:c"], 'invalid value "a:b:c" for flag -labels: malformed item: a:b:c'],
  ];
  for (const [args, message] of cases) assertFlagError(sample().fs, args, message);
});

Deno.test("FlagSet int flags accept Go integer syntax", () => {
  const cases: Array<[string, number]> = [
    ["42", 42],
    ["-7", -7],
    ["+7", 7],
    ["0x1f", 31],
    ["0X1F", 31],
    ["0o17", 15],
    ["017", 15],
    ["0b101", 5],
    ["1_000", 1_000],
    ["0x_1f", 31],
    ["0", 0],
    ["-9223372036854775808", -9223372036854775808],
  ];
  for (const [text, value] of cases) {
    const f = sample();
    f.fs.parse([`-kube-api-burst=${text}`]);
    assert.equal(f.burst.value, value, text);
  }
  for (const text of ["08", "1__0", "_1", "1_", "0x", "1e3", " 1"]) {
    assertFlagError(
      sample().fs,
      [`-kube-api-burst=${text}`],
      `invalid value ${JSON.stringify(text)} for flag -kube-api-burst: parse error`,
    );
  }
});

Deno.test("FlagSet uint flags accept zero and large values", () => {
  const f = sample();
  f.fs.parse(["-worker-threads=0"]);
  assert.equal(f.workers.value, 0);
  const g = sample();
  g.fs.parse(["-worker-threads", "0x10"]);
  assert.equal(g.workers.value, 16);
});

Deno.test("FlagSet float flags accept Go float syntax", () => {
  const cases: Array<[string, number]> = [
    ["2.5", 2.5],
    ["10", 10],
    ["-1", -1],
    [".5", 0.5],
    ["5.", 5],
    ["1e3", 1_000],
    ["1E-2", 0.01],
    ["1_000.5", 1_000.5],
    ["0x1p-2", 0.25],
    ["0x1.8p1", 3],
    ["inf", Infinity],
    ["-Infinity", -Infinity],
  ];
  for (const [text, value] of cases) {
    const f = sample();
    f.fs.parse([`-kube-api-qps=${text}`]);
    assert.equal(f.qps.value, value, text);
  }
  const f = sample();
  f.fs.parse(["-kube-api-qps=NaN"]);
  assert.ok(Number.isNaN(f.qps.value));
});

Deno.test("FlagSet custom flags merge repeated occurrences through parse()", () => {
  const f = sample();
  f.fs.parse(["--labels=a:1", "--labels", "b:2"]);
  assert.deepEqual(f.labels.value, { a: "1", b: "2" });
});

Deno.test("FlagSet custom bool flags take the bare form", () => {
  const fs = new FlagSet({ name: "p" });
  const flag = fs.custom<string>("mode", "off", "Mode.", {
    isBool: true,
    parse: (text) => parseGoBool(text) ? "on" : "off",
  });
  fs.parse(["-mode"]);
  assert.equal(flag.value, "on");
  fs.parse(["-mode=false"]);
  assert.equal(flag.value, "off");
  assertFlagError(
    fs,
    ["-mode=maybe"],
    'invalid boolean value "maybe" for -mode: ' +
      'strconv.ParseBool: parsing "maybe": invalid syntax',
  );
});

Deno.test("FlagSet rejects redefinitions and bad names", () => {
  const fs = new FlagSet({ name: "p" });
  fs.bool("x", false, "");
  assert.throws(() => fs.string("x", "", ""), /flag redefined/);
  assert.throws(() => fs.string("", "", ""), TypeError);
  assert.throws(() => fs.string("-y", "", ""), TypeError);
  assert.throws(() => fs.string("a=b", "", ""), TypeError);
  assert.throws(() => fs.uint("u", -1, ""), RangeError);
  assert.throws(() => fs.int("i", 1.5, ""), RangeError);
});

Deno.test("parseGoBool() accepts exactly strconv.ParseBool's spellings", () => {
  assert.equal(parseGoBool("True"), true);
  assert.equal(parseGoBool("F"), false);
  for (const text of ["yes", "no", "tRUE", "on", "", " true"]) {
    assert.throws(() => parseGoBool(text), {
      message: `strconv.ParseBool: parsing ${JSON.stringify(text)}: invalid syntax`,
    });
  }
});

Deno.test("FlagSet.usage() prints Go's PrintDefaults layout, sorted, with non-zero defaults", () => {
  const fs = new FlagSet({ name: "csi-attacher" });
  fs.duration("timeout", 15_000, "Timeout for one call.");
  fs.duration("zero-wait", 0, "No default shown.");
  fs.bool("x", false, "One-letter bool on one line.");
  fs.bool("on", true, "A bool that defaults to true.");
  fs.string("csi-address", "/run/csi/socket", "Address of the socket.");
  fs.string("empty", "", "Empty default.");
  fs.uint("worker-threads", 10, "Workers.");
  fs.int("max-grpc-log-length", -1, "Cap.");
  fs.float("kube-api-qps", 5, "QPS.");
  fs.string("http-endpoint", "", "Listen on this address (example: `:8080`).");
  fs.string("metrics-address", "", "Old.", { deprecated: "use --http-endpoint." });
  fs.bool("automaxprocs", false, "Set GOMAXPROCS.", { ignored: "not a Go program." });
  fs.custom("gates", {}, "Line one.\nLine two.", { parse: (_t, c) => c });
  assert.equal(
    fs.usage(),
    [
      "Usage of csi-attacher:",
      "  -automaxprocs",
      "    \tSet GOMAXPROCS.",
      "    \tNo effect: not a Go program.",
      "  -csi-address string",
      '    \tAddress of the socket. (default "/run/csi/socket")',
      "  -empty string",
      "    \tEmpty default.",
      "  -gates value",
      "    \tLine one.",
      "    \tLine two.",
      "  -http-endpoint :8080",
      "    \tListen on this address (example: :8080).",
      "  -kube-api-qps float",
      "    \tQPS. (default 5)",
      "  -max-grpc-log-length int",
      "    \tCap. (default -1)",
      "  -metrics-address string",
      "    \tOld.",
      "    \tDEPRECATED: use --http-endpoint.",
      "  -on",
      "    \tA bool that defaults to true. (default true)",
      "  -timeout duration",
      "    \tTimeout for one call. (default 15s)",
      "  -worker-threads uint",
      "    \tWorkers. (default 10)",
      "  -x\tOne-letter bool on one line.",
      "  -zero-wait duration",
      "    \tNo default shown.",
      "",
    ].join("\n"),
  );
});

Deno.test("FlagSet.flags() and lookup() expose the definitions", () => {
  const f = sample();
  assert.deepEqual(f.fs.flags().map((flag) => flag.name), [
    "csi-address",
    "kube-api-burst",
    "kube-api-qps",
    "labels",
    "leader-election",
    "timeout",
    "worker-threads",
  ]);
  assert.equal(f.fs.lookup("timeout")?.kind, "duration");
  assert.equal(f.fs.lookup("nope"), undefined);
  assert.equal(f.fs.name, "prog");
});

Deno.test("Flag.valueText() writes values as Go's flag.Value.String(); classified flags are masked", () => {
  const fs = new FlagSet({ name: "test" });
  const str = fs.string("s", "", "a string");
  const on = fs.bool("b", false, "a bool");
  const n = fs.int("n", 0, "an int");
  const f = fs.float("f", 5, "a float");
  const d = fs.duration("d", 90_000, "a duration");
  const map = fs.custom<Record<string, boolean>>("m", {}, "a map", {
    parse: (text, current) => ({ ...current, [text]: true }),
  });
  const secret = fs.string("token", "", "a credential", { classified: true });
  fs.parse(["-s=/run/csi/socket", "-b", "-n=-3", "-f=0.25", "-m=B", "-m=A", "-token=hunter2"]);
  assert.deepEqual(
    [str, on, n, f, d, map, secret].map((x) => x.valueText()),
    ["/run/csi/socket", "true", "-3", "0.25", "1m30s", "A=true,B=true", CLASSIFIED],
  );
  assert.equal(secret.value, "hunter2", "masked only in its text");
  assert.equal(secret.classified, true);
  assert.equal(str.classified, false);
});
