import { describe, expect, it } from "vitest";
import { LineSplitter } from "./lines.js";

const text = '{"a":"Zoë 😀"}\n\n{"b":"日本語 Ωμέγα שלום"}\n{"c":1}\n';
const bytes = Buffer.from(text, "utf8");
const expected = text.split("\n").filter(Boolean);

function feed(chunks: Buffer[]): string[] {
  const s = new LineSplitter();
  return chunks.flatMap((c) => s.push(c)).map((l) => l.toString("utf8"));
}

describe("LineSplitter", () => {
  it("gives the same lines wherever the stream is cut, even inside a multi-byte character", () => {
    for (let cut = 0; cut <= bytes.length; cut++) {
      expect(feed([bytes.subarray(0, cut), bytes.subarray(cut)]), `cut at byte ${cut}`).toEqual(expected);
    }
  });

  it("gives the same lines from one byte at a time", () => {
    expect(feed([...bytes].map((b) => Buffer.from([b])))).toEqual(expected);
  });

  it("holds an unfinished last line back", () => {
    const s = new LineSplitter();
    expect(s.push(Buffer.from('{"a":1}\n{"b"')).map(String)).toEqual(['{"a":1}']);
    expect(s.push(Buffer.from(":2}\n")).map(String)).toEqual(['{"b":2}']);
  });
});
