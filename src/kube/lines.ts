// Splits a byte stream into lines without decoding it first: a chunk boundary may fall inside a
// multi-byte UTF-8 character, so bytes become text only once a whole line is in hand. The byte
// 0x0A never occurs inside a multi-byte UTF-8 sequence, so splitting on it is safe. Each byte is
// copied at most once (a partial line's pieces are joined when its newline arrives), so the cost
// stays linear however the stream is chunked.

const NEWLINE = 0x0a;

export class LineSplitter {
  private pending: Buffer[] = [];

  /** The complete lines (without their newline) that `chunk` finishes, in order; empty lines skipped. */
  push(chunk: Buffer): Buffer[] {
    const lines: Buffer[] = [];
    let start = 0;
    let nl: number;
    while ((nl = chunk.indexOf(NEWLINE, start)) >= 0) {
      const piece = chunk.subarray(start, nl);
      const line = this.pending.length ? Buffer.concat([...this.pending, piece]) : piece;
      this.pending = [];
      if (line.length) lines.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) this.pending.push(chunk.subarray(start));
    return lines;
  }

}
