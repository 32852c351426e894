/**
 * Relative links of Markdown files, and whether they resolve: a link to a file or folder of the
 * repository must name one that exists, and a `#fragment` into a Markdown file must name one of
 * its headings, slugged as GitHub renders heading anchors (lower case, punctuation other than `-`
 * and `_` dropped, spaces turned into `-`, a repeated heading suffixed `-1`, `-2`, …).
 *
 * Links are inline links and images (`[text](target)`, `![alt](target)`) and reference
 * definitions (`[label]: target`). Links inside fenced code blocks and code spans are not links.
 * A target with a scheme (`https:`, `mailto:`) is not checked: only what the repository itself
 * holds can be checked without a network.
 *
 * @module
 */

/** A link found in a Markdown text: its 1-based line and its target as written. */
export interface MarkdownLink {
  line: number;
  target: string;
}

/** A link that does not resolve, with the file it is in and why. */
export interface BrokenLink {
  /** The Markdown file, relative to the repository. */
  file: string;
  line: number;
  target: string;
  reason: string;
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
const INLINE_LINK =
  /!?\[(?:[^[\]]|\[[^[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
const REFERENCE_DEFINITION = /^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/;
const SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:/;

/**
 * The lines of `text` outside fenced code blocks, by line number: as written, and with code spans
 * blanked out.
 */
function proseLines(text: string): { line: number; raw: string; text: string }[] {
  const out: { line: number; raw: string; text: string }[] = [];
  let fence: string | undefined;
  for (const [i, raw] of text.split("\n").entries()) {
    const opening = FENCE.exec(raw);
    if (fence !== undefined) {
      if (opening !== null && opening[1]!.startsWith(fence)) fence = undefined;
      continue;
    }
    if (opening !== null) {
      fence = opening[1]!;
      continue;
    }
    out.push({ line: i + 1, raw, text: blankCodeSpans(raw) });
  }
  return out;
}

/** `text` with every code span's content replaced by spaces (a span never holds a link). */
function blankCodeSpans(text: string): string {
  return text.replace(/(`+)([^`]|(?!\1)`)*?\1/g, (span) => " ".repeat(span.length));
}

/** Every link of a Markdown text, in order. */
export function markdownLinks(text: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  for (const { line, text: prose } of proseLines(text)) {
    const definition = REFERENCE_DEFINITION.exec(prose);
    if (definition !== null) {
      links.push({ line, target: unbracket(definition[1]!) });
      continue;
    }
    for (const match of prose.matchAll(INLINE_LINK)) {
      links.push({ line, target: unbracket(match[1]!) });
    }
  }
  return links;
}

function unbracket(target: string): string {
  return target.startsWith("<") && target.endsWith(">") ? target.slice(1, -1) : target;
}

/** GitHub's anchor of one heading's text, before duplicates are numbered. */
export function headingSlug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images keep their text
    .replace(/<[^>]+>/g, "") // inline HTML
    .replace(/`/g, "");
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of every ATX heading (`#` … `######`) of a Markdown text. */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { raw } of proseLines(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+\s*)?$/.exec(raw);
    if (heading === null) continue;
    const slug = headingSlug(heading[1]!);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Reads files of the repository; a path that does not exist reads as `undefined`. */
export interface RepositoryFiles {
  /** The text of a file, or `undefined` when there is none at `path`. */
  readText(path: string): Promise<string | undefined>;
  /** Whether a file or folder exists at `path`. */
  exists(path: string): Promise<boolean>;
}

/** {@link RepositoryFiles} over the file system, under `root` (a `file:` URL ending in `/`). */
export function repositoryFiles(root: URL): RepositoryFiles {
  return {
    async readText(path) {
      try {
        return await Deno.readTextFile(new URL(path, root));
      } catch (err) {
        if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.IsADirectory) {
          return undefined;
        }
        throw err;
      }
    },
    async exists(path) {
      try {
        await Deno.stat(new URL(path, root));
        return true;
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return false;
        throw err;
      }
    },
  };
}

/** `path` (relative, with `/`) resolved against the folder of `from`, or `undefined` above the root. */
export function resolveRelative(from: string, path: string): string | undefined {
  const parts = from.split("/").slice(0, -1);
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (parts.length === 0) return undefined;
      parts.pop();
    } else {
      parts.push(part);
    }
  }
  return parts.join("/");
}

/**
 * The links of the Markdown files `files` (paths relative to the repository) that do not resolve
 * in `repo`, in file and line order.
 */
export async function brokenLinks(
  files: readonly string[],
  repo: RepositoryFiles,
): Promise<BrokenLink[]> {
  const broken: BrokenLink[] = [];
  const anchorsOf = new Map<string, Set<string> | undefined>();
  const anchors = async (path: string): Promise<Set<string> | undefined> => {
    if (!anchorsOf.has(path)) {
      const text = await repo.readText(path);
      anchorsOf.set(path, text === undefined ? undefined : headingAnchors(text));
    }
    return anchorsOf.get(path);
  };
  for (const file of files) {
    const text = await repo.readText(file);
    if (text === undefined) {
      broken.push({ file, line: 0, target: file, reason: "the Markdown file does not exist" });
      continue;
    }
    for (const { line, target } of markdownLinks(text)) {
      if (SCHEME.test(target) || target.startsWith("//")) continue;
      const hash = target.indexOf("#");
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const fragment = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
      // A leading `/` is the repository's root, as GitHub resolves it.
      const path = pathPart === ""
        ? file
        : pathPart.startsWith("/")
        ? resolveRelative("", pathPart)
        : resolveRelative(file, pathPart);
      if (path === undefined) {
        broken.push({ file, line, target, reason: "not a path inside the repository" });
        continue;
      }
      if (!(await repo.exists(path))) {
        broken.push({ file, line, target, reason: `${path} does not exist` });
        continue;
      }
      if (fragment === undefined || fragment === "" || !path.endsWith(".md")) continue;
      if (!(await anchors(path))?.has(fragment)) {
        broken.push({ file, line, target, reason: `${path} has no heading #${fragment}` });
      }
    }
  }
  return broken;
}

/**
 * Every Markdown file under the repository root, as sorted relative paths; folders whose name
 * starts with `.` and the build and result folders (`dist/`, `node_modules/`, `bench/results/`)
 * are skipped.
 */
export async function markdownFiles(root: URL): Promise<string[]> {
  const skip = new Set(["dist", "node_modules", "bench/results"]);
  const found: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for await (const entry of Deno.readDir(new URL(dir === "" ? "." : dir, root))) {
      const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
      if (entry.name.startsWith(".") || skip.has(path)) continue;
      if (entry.isDirectory) await walk(path);
      else if (entry.isFile && entry.name.endsWith(".md")) found.push(path);
    }
  };
  await walk("");
  return found.sort();
}
