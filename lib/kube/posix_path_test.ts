import assert from "node:assert/strict";
import posix from "node:path/posix";
import { dirname, isAbsolute, join, normalize, resolve } from "./posix_path.ts";

const PATHS = [
  "",
  ".",
  "..",
  "/",
  "//",
  "a",
  "a/",
  "/a",
  "/a/",
  "a/b",
  "/a/b/c",
  "/a//b///c/",
  "//a",
  "./a/./b",
  "a/../b",
  "../a/../../b",
  "/../a",
  "/a/b/../../..",
  "a/b/..",
  "kubeconfig",
  "/etc/kube/config",
];

Deno.test("posix_path gives node:path/posix's results", () => {
  for (const p of PATHS) {
    assert.equal(isAbsolute(p), posix.isAbsolute(p), `isAbsolute(${JSON.stringify(p)})`);
    if (p !== "") {
      // The same folder; node keeps some repeated slashes that name the same folder.
      assert.equal(
        posix.normalize(dirname(p)),
        posix.normalize(posix.dirname(p)),
        `dirname(${JSON.stringify(p)})`,
      );
      assert.equal(
        normalize(p),
        posix.normalize(p).replace(/(.)\/$/, "$1"),
        `normalize(${JSON.stringify(p)})`,
      );
    }
    for (const base of ["/base/dir", "rel/dir", "/", "."]) {
      assert.equal(resolve(base, p), posix.resolve(base, p), `resolve(${base}, ${p})`);
    }
  }
  assert.equal(join("/home/u", ".kube", "config"), posix.join("/home/u", ".kube", "config"));
  assert.equal(join("home/", "/.kube/", "config"), posix.join("home/", "/.kube/", "config"));
  assert.equal(join("", ""), posix.join("", ""));
  assert.equal(join("/a", "..", "b"), posix.join("/a", "..", "b"));
});
