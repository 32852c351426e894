import assert from "node:assert/strict";
import {
  encodeInteger,
  encodeLiterals,
  encodeString,
  huffmanEncode,
  octets,
  ReferenceHpackDecoder,
  ReferenceHpackError,
  ReferenceListSizeError,
} from "./hpack_reference.ts";

const hex = (s: string) =>
  Uint8Array.from(s.replace(/\s+/g, "").match(/../g) ?? [], (h) => parseInt(h, 16));

Deno.test("the reference decoder reads RFC 7541 C.4 (Huffman requests) and C.6 (evicting responses)", () => {
  const d = new ReferenceHpackDecoder();
  d.decode(hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"));
  d.decode(hex("8286 84be 5886 a8eb 1064 9cbf"));
  assert.deepEqual(
    d.decode(hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")).at(-1),
    ["custom-key", "custom-value"],
  );
  assert.equal(d.table.size, 164);
  const r = new ReferenceHpackDecoder({ maxTableSize: 256 });
  r.decode(hex(
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6" +
      "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
  ));
  r.decode(hex("4883 640e ffc1 c0bf"));
  r.decode(hex(
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab" +
      "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f" +
      "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
  ));
  assert.equal(r.table.size, 215);
  assert.deepEqual(r.table.entries.map(([n]) => n), ["set-cookie", "content-encoding", "date"]);
});

Deno.test("the test kit's encoders: RFC 7541 C.1 integers, C.4.1's Huffman string, literals", () => {
  assert.deepEqual(encodeInteger(10, 5), [10]);
  assert.deepEqual(encodeInteger(1337, 5), [31, 154, 10]);
  assert.deepEqual(encodeInteger(42, 8), [42]);
  assert.deepEqual(huffmanEncode(octets("www.example.com")), [
    ...hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
  ]);
  assert.deepEqual(encodeString("no-cache", true), [...hex("86 a8eb 1064 9cbf")]);
  const fields: [string, string][] = [["grpc-status", "0"], ["x", "\xff"]];
  assert.deepEqual(new ReferenceHpackDecoder().decode(encodeLiterals(fields)), fields);
});

Deno.test("the reference decoder refuses what RFC 7541 and the documented limits refuse", () => {
  const refuse = (h: string) =>
    assert.throws(() => new ReferenceHpackDecoder().decode(hex(h)), ReferenceHpackError, h);
  refuse("80"); // index 0
  refuse("be"); // beyond the tables
  refuse("82 20"); // size update after a field
  refuse("3f e2 1f"); // size update to 4097
  refuse("3f 80 80 80 80 80 00"); // 6 continuation octets
  refuse("00 01 61 81 ff"); // Huffman: EOS prefix longer than 7 bits
  refuse("00 01 61 81 00"); // Huffman: padding not all ones
  assert.throws(
    () => new ReferenceHpackDecoder({ maxHeaderListSize: 64 }).decode(hex("82 82")),
    ReferenceListSizeError,
  );
});
