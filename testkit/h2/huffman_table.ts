/**
 * The Huffman code of HPACK (RFC 7541 Appendix B), written down from the RFC's table for the test
 * kit's reference HPACK coder ({@link import("./hpack_reference.ts")}): independent of the
 * attacher's decoder, which derives its codes from code lengths alone.
 *
 * @module
 */

/**
 * RFC 7541 Appendix B, symbol by symbol (0–255, then EOS = 256): `code/bits`, the code in hex,
 * right-aligned as the RFC's "code as hex" column lists it.
 */
const TABLE =
  "1ff8/13 7fffd8/23 fffffe2/28 fffffe3/28 fffffe4/28 fffffe5/28 fffffe6/28 fffffe7/28 " +
  "fffffe8/28 ffffea/24 3ffffffc/30 fffffe9/28 fffffea/28 3ffffffd/30 fffffeb/28 fffffec/28 " +
  "fffffed/28 fffffee/28 fffffef/28 ffffff0/28 ffffff1/28 ffffff2/28 3ffffffe/30 ffffff3/28 " +
  "ffffff4/28 ffffff5/28 ffffff6/28 ffffff7/28 ffffff8/28 ffffff9/28 ffffffa/28 ffffffb/28 " +
  "14/6 3f8/10 3f9/10 ffa/12 1ff9/13 15/6 f8/8 7fa/11 3fa/10 3fb/10 f9/8 7fb/11 fa/8 16/6 " +
  "17/6 18/6 0/5 1/5 2/5 19/6 1a/6 1b/6 1c/6 1d/6 1e/6 1f/6 5c/7 fb/8 7ffc/15 20/6 ffb/12 " +
  "3fc/10 1ffa/13 21/6 5d/7 5e/7 5f/7 60/7 61/7 62/7 63/7 64/7 65/7 66/7 67/7 68/7 69/7 6a/7 " +
  "6b/7 6c/7 6d/7 6e/7 6f/7 70/7 71/7 72/7 fc/8 73/7 fd/8 1ffb/13 7fff0/19 1ffc/13 3ffc/14 " +
  "22/6 7ffd/15 3/5 23/6 4/5 24/6 5/5 25/6 26/6 27/6 6/5 74/7 75/7 28/6 29/6 2a/6 7/5 2b/6 " +
  "76/7 2c/6 8/5 9/5 2d/6 77/7 78/7 79/7 7a/7 7b/7 7ffe/15 7fc/11 3ffd/14 1ffd/13 ffffffc/28 " +
  "fffe6/20 3fffd2/22 fffe7/20 fffe8/20 3fffd3/22 3fffd4/22 3fffd5/22 7fffd9/23 3fffd6/22 " +
  "7fffda/23 7fffdb/23 7fffdc/23 7fffdd/23 7fffde/23 ffffeb/24 7fffdf/23 ffffec/24 ffffed/24 " +
  "3fffd7/22 7fffe0/23 ffffee/24 7fffe1/23 7fffe2/23 7fffe3/23 7fffe4/23 1fffdc/21 3fffd8/22 " +
  "7fffe5/23 3fffd9/22 7fffe6/23 7fffe7/23 ffffef/24 3fffda/22 1fffdd/21 fffe9/20 3fffdb/22 " +
  "3fffdc/22 7fffe8/23 7fffe9/23 1fffde/21 7fffea/23 3fffdd/22 3fffde/22 fffff0/24 1fffdf/21 " +
  "3fffdf/22 7fffeb/23 7fffec/23 1fffe0/21 1fffe1/21 3fffe0/22 1fffe2/21 7fffed/23 3fffe1/22 " +
  "7fffee/23 7fffef/23 fffea/20 3fffe2/22 3fffe3/22 3fffe4/22 7ffff0/23 3fffe5/22 3fffe6/22 " +
  "7ffff1/23 3ffffe0/26 3ffffe1/26 fffeb/20 7fff1/19 3fffe7/22 7ffff2/23 3fffe8/22 " +
  "1ffffec/25 3ffffe2/26 3ffffe3/26 3ffffe4/26 7ffffde/27 7ffffdf/27 3ffffe5/26 fffff1/24 " +
  "1ffffed/25 7fff2/19 1fffe3/21 3ffffe6/26 7ffffe0/27 7ffffe1/27 3ffffe7/26 7ffffe2/27 " +
  "fffff2/24 1fffe4/21 1fffe5/21 3ffffe8/26 3ffffe9/26 ffffffd/28 7ffffe3/27 7ffffe4/27 " +
  "7ffffe5/27 fffec/20 fffff3/24 fffed/20 1fffe6/21 3fffe9/22 1fffe7/21 1fffe8/21 7ffff3/23 " +
  "3fffea/22 3fffeb/22 1ffffee/25 1ffffef/25 fffff4/24 fffff5/24 3ffffea/26 7ffff4/23 " +
  "3ffffeb/26 7ffffe6/27 3ffffec/26 3ffffed/26 7ffffe7/27 7ffffe8/27 7ffffe9/27 7ffffea/27 " +
  "7ffffeb/27 ffffffe/28 7ffffec/27 7ffffed/27 7ffffee/27 7ffffef/27 7fffff0/27 3ffffee/26 " +
  "3fffffff/30 ";

/** `[code, bits]` of every symbol 0–256 (256 is EOS). */
export const HUFFMAN_CODES: readonly (readonly [code: number, bits: number])[] = Object.freeze(
  TABLE.trim().split(/\s+/).map((entry) => {
    const [code, bits] = entry.split("/");
    return Object.freeze([parseInt(code!, 16), Number(bits)] as const);
  }),
);

/** The EOS symbol (RFC 7541 §5.2). */
export const EOS = 256;
