/**
 * Every relative link of the repository's Markdown files resolves: the documents people read
 * first (README.md, ARCHITECTURE.md, CONTRIBUTING.md, CHANGELOG.md) and the protocol platform's
 * README among them. A moved or renamed file, or a renamed heading, fails here instead of in a
 * reader's browser.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  brokenLinks,
  headingAnchors,
  headingSlug,
  markdownFiles,
  markdownLinks,
  type RepositoryFiles,
  repositoryFiles,
} from "./docs_links.ts";

const ROOT = new URL("../../", import.meta.url);

/** The documents that must exist and be checked, whatever else the walk finds. */
const REQUIRED = [
  "README.md",
  "ARCHITECTURE.md",
  "CONTRIBUTING.md",
  "CHANGELOG.md",
  "lib/wire/README.md",
];

Deno.test("docs: every relative link of every Markdown file resolves", async () => {
  const files = await markdownFiles(ROOT);
  for (const required of REQUIRED) assert.ok(files.includes(required), `${required} is missing`);
  const broken = await brokenLinks(files, repositoryFiles(ROOT));
  assert.deepEqual(
    broken.map((b) => `${b.file}:${b.line}: ${b.target} (${b.reason})`),
    [],
  );
});

Deno.test("docs: the required documents hold relative links, so the check is exercised", async () => {
  const repo = repositoryFiles(ROOT);
  for (const file of ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"]) {
    const text = await repo.readText(file);
    assert.ok(text !== undefined, file);
    const relative = markdownLinks(text).filter((l) => !/^[a-z]+:/.test(l.target));
    assert.ok(relative.length >= 3, `${file}: ${relative.length} relative links`);
  }
});

/** An in-memory repository: file paths to texts, folders implied by the paths. */
function memoryRepo(files: Record<string, string>): RepositoryFiles {
  return {
    readText: (path) => Promise.resolve(files[path]),
    exists: (path) =>
      Promise.resolve(
        path in files || Object.keys(files).some((f) => f.startsWith(`${path}/`)),
      ),
  };
}

Deno.test("brokenLinks() reports a missing file, a missing heading and a path above the root", async () => {
  const repo = memoryRepo({
    "README.md": [
      "# Title",
      "See [the guide](docs/guide.md), [gone](docs/gone.md) and [a folder](lib/).",
      "[Up](../outside.md), [anchor](docs/guide.md#setting-up), [bad anchor](docs/guide.md#nope).",
      "[here](#title) and [not here](#missing).",
      "[ref]: lib/code.ts",
      "[ref2]: lib/none.ts",
    ].join("\n"),
    "docs/guide.md": "## Setting up\n\nBack to [the README](../README.md#title).",
    "lib/code.ts": "",
  });
  const broken = await brokenLinks(["README.md", "docs/guide.md"], repo);
  assert.deepEqual(broken.map((b) => [b.file, b.line, b.target]), [
    ["README.md", 2, "docs/gone.md"],
    ["README.md", 3, "../outside.md"],
    ["README.md", 3, "docs/guide.md#nope"],
    ["README.md", 4, "#missing"],
    ["README.md", 6, "lib/none.ts"],
  ]);
});

Deno.test("brokenLinks() reports a Markdown file to check that does not exist", async () => {
  const broken = await brokenLinks(["NOPE.md"], memoryRepo({}));
  assert.deepEqual(broken.map((b) => b.target), ["NOPE.md"]);
});

Deno.test("markdownLinks() skips code blocks and code spans, and keeps external links apart", () => {
  const text = [
    '[a](one.md) `[b](two.md)` ![img](pic.png "title")',
    "```sh",
    "[c](three.md)",
    "```",
    "[d](https://example.com/x) [e](<with space.md>) [`code` text](four.md#x)",
  ].join("\n");
  assert.deepEqual(markdownLinks(text), [
    { line: 1, target: "one.md" },
    { line: 1, target: "pic.png" },
    { line: 5, target: "https://example.com/x" },
    { line: 5, target: "with space.md" },
    { line: 5, target: "four.md#x" },
  ]);
});

Deno.test("headingSlug() and headingAnchors() follow GitHub's heading anchors", () => {
  assert.equal(headingSlug("Replacing the Go sidecar"), "replacing-the-go-sidecar");
  assert.equal(headingSlug("`--reconcile-timeout` and #356"), "--reconcile-timeout-and-356");
  assert.equal(headingSlug("Metrics, health (and logs)"), "metrics-health-and-logs");
  assert.equal(headingSlug("[Linked](x.md) heading"), "linked-heading");
  assert.equal(headingSlug("snake_case stays"), "snake_case-stays");
  const anchors = headingAnchors("# A\n## A\n```\n# Not a heading\n```\n### B ###\n#no-space");
  assert.deepEqual([...anchors], ["a", "a-1", "b"]);
});
