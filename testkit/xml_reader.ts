/**
 * A small XML reader for tests that read documents the project writes (the JUnit file of
 * `sandbox check`): elements, attributes, character data, the five predefined entities and
 * numeric character references, comments and the XML declaration. No DTDs, no namespaces,
 * no CDATA sections; anything else malformed throws.
 *
 * @module
 */

/** An element: name, attributes, child elements, and its character data (children's excluded). */
export interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  text: string;
}

const ENTITIES: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
};

function decode(text: string): string {
  if (/&(?!#x[0-9a-fA-F]+;|#[0-9]+;|[a-z]+;)/.test(text)) {
    throw new SyntaxError("bare & in character data");
  }
  if (text.includes("<")) throw new SyntaxError("< in character data");
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return String.fromCodePoint(parseInt(ref.slice(2), 16));
    if (ref.startsWith("#")) return String.fromCodePoint(parseInt(ref.slice(1), 10));
    const named = ENTITIES[ref];
    if (named === undefined) throw new SyntaxError(`unknown entity ${whole}`);
    return named;
  });
}

/**
 * Parses `xml` and returns its root element.
 * @throws {SyntaxError} for a document this reader does not accept
 */
export function parseXml(xml: string): XmlElement {
  let at = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${at}`);
  };
  const skipMisc = () => {
    for (;;) {
      const ws = /^\s*/.exec(xml.slice(at))![0];
      at += ws.length;
      if (xml.startsWith("<?", at)) {
        const end = xml.indexOf("?>", at);
        if (end < 0) fail("unterminated declaration");
        at = end + 2;
      } else if (xml.startsWith("<!--", at)) {
        const end = xml.indexOf("-->", at);
        if (end < 0) fail("unterminated comment");
        at = end + 3;
      } else return;
    }
  };
  const element = (): XmlElement => {
    const open = /^<([A-Za-z_][\w.:-]*)/.exec(xml.slice(at));
    if (open === null) return fail("expected an element");
    at += open[0].length;
    const node: XmlElement = { name: open[1]!, attributes: {}, children: [], text: "" };
    for (;;) {
      const attr = /^\s+([A-Za-z_][\w.:-]*)\s*=\s*("([^"<]*)"|'([^'<]*)')/.exec(xml.slice(at));
      if (attr === null) break;
      if (Object.hasOwn(node.attributes, attr[1]!)) fail(`duplicate attribute ${attr[1]}`);
      node.attributes[attr[1]!] = decode(attr[3] ?? attr[4] ?? "");
      at += attr[0].length;
    }
    const close = /^\s*(\/?)>/.exec(xml.slice(at));
    if (close === null) return fail(`malformed start tag <${node.name}`);
    at += close[0].length;
    if (close[1] === "/") return node;
    for (;;) {
      const lt = xml.indexOf("<", at);
      if (lt < 0) fail(`unterminated <${node.name}>`);
      node.text += decode(xml.slice(at, lt));
      at = lt;
      if (xml.startsWith("<!--", at)) {
        const end = xml.indexOf("-->", at);
        if (end < 0) fail("unterminated comment");
        at = end + 3;
      } else if (xml.startsWith("</", at)) {
        const end = /^<\/([A-Za-z_][\w.:-]*)\s*>/.exec(xml.slice(at));
        if (end === null || end[1] !== node.name) fail(`expected </${node.name}>`);
        at += end![0].length;
        return node;
      } else {
        node.children.push(element());
      }
    }
  };
  skipMisc();
  const root = element();
  skipMisc();
  if (at !== xml.length) fail("content after the root element");
  return root;
}

/** Every descendant element of `root` (itself included) named `name`, in document order. */
export function findAll(root: XmlElement, name: string): XmlElement[] {
  const out: XmlElement[] = [];
  const walk = (node: XmlElement) => {
    if (node.name === name) out.push(node);
    node.children.forEach(walk);
  };
  walk(root);
  return out;
}
