// Runs the shell blocks of a document in a ShellSession and holds each against the console block
// the document shows after it. What may differ between a run and the page: times, ages and
// durations ("2s", "5ms", "2026-12-03T07:29:31Z"), UUIDs and random hex suffixes. Everything
// else, tables' column names, every word, every count, must be what the page shows.
import { spawn } from "node:child_process";
import { expect } from "vitest";
import { columns, shellCommands, type Block } from "./markdown.js";
import type { ShellSession } from "./shell.js";

/** A line with its run-to-run variable parts replaced by placeholders. */
export function skeleton(line: string): string {
  return columns(line)
    .join("  ")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/-[0-9a-f]{8}\b/g, "-<hex>")
    .replace(/\b\d+(\.\d+)?(ms|s|m|h|d)\b/g, "<duration>");
}

const lines = (text: string): string[] =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "");

/**
 * The shown output is how the real one ends, line for line, variable parts aside: a page shows
 * the output of a block's last command or last few commands, not every `created` line before.
 */
export function expectSameOutput(actual: string, shown: string, what: string): void {
  const want = lines(shown).map(skeleton);
  expect(want.length, `${what}: an empty output block`).toBeGreaterThan(0);
  expect(lines(actual).map(skeleton).slice(-want.length), `${what}\n--- actual ---\n${actual}\n--- shown ---\n${shown}`).toEqual(want);
}

/** `kubectl ... -w`: a command that runs until the user stops it. */
export const isWatch = (command: string): boolean => /^kubectl\b.*\s(-w|--watch)(\s|$)/.test(command);

/**
 * Runs a watch command with the session's environment until `until` holds for its output, then
 * stops it as Ctrl-C would. Returns what it printed.
 */
export async function runWatch(session: ShellSession, cwd: string, command: string, until: (out: string) => boolean, timeoutMs: number): Promise<string> {
  const env = await session.env();
  const child = spawn("bash", ["-c", command], { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  const deadline = Date.now() + timeoutMs;
  try {
    while (!until(out)) {
      if (child.exitCode !== null) throw new Error(`${command} exited ${child.exitCode}: ${err}`);
      if (Date.now() > deadline) throw new Error(`${command}: not seen in ${timeoutMs} ms; it printed:\n${out}\n${err}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    try {
      process.kill(-child.pid!, "SIGINT");
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * A line the README's receiver prints (`<webhook-id> <body>`): a background job, so a terminal
 * shows it among the other commands' output; it is held against the receiver's own block.
 */
export const isReceiverLine = (line: string): boolean => /^[\w.:-]+ \{".*\}$/.test(line.trim());

/**
 * The text with each receiver line on a line of its own. The receiver writes a line at once, but
 * a command in the foreground may be between two writes of its own: curl writes the body, then
 * `-w '\n%{http_code}'`, and a delivery that arrives in between is printed after the body, on
 * its line (a terminal shows the same). Such a line is split after the JSON that ends before it.
 */
export function splitReceiverLines(text: string): string {
  return text
    .split("\n")
    .map((l) => {
      const m = /^(.*\})([\w.:-]+ \{".*\})$/.exec(l);
      return m && m[1]!.trim() !== "" ? `${m[1]}\n${m[2]}` : l;
    })
    .join("\n");
}

export interface BlockRun {
  block: Block;
  /** What each command printed, in order (what a terminal shows). */
  output: string;
  /** What its watch printed, if it has one. */
  watch?: string;
}

/**
 * Runs every command of a shell block; each must exit 0. A watch runs until the last row of the
 * console block shown after it appears (the row's first and fourth columns: name and phase).
 */
export async function runBlock(session: ShellSession, cwd: string, block: Block, shown: Block | undefined, opts: { timeoutMs?: number; context?: () => string } = {}): Promise<BlockRun> {
  let output = "";
  let watch: string | undefined;
  for (const command of shellCommands(block.text)) {
    if (isWatch(command)) {
      if (!shown) throw new Error(`README line ${block.line}: a watch without the output it shows after it`);
      const last = columns(lines(shown.text).at(-1)!);
      const want = (out: string) => lines(out).some((l) => columns(l)[0] === last[0] && columns(l)[3] === last[3]);
      watch = await runWatch(session, cwd, command, want, opts.timeoutMs ?? 120_000);
      output += watch;
      continue;
    }
    const r = await session.run(command, { timeoutMs: opts.timeoutMs ?? 120_000 });
    expect(r.code, `README line ${block.line}: ${command}\noutput: ${r.output}${opts.context ? `\n${opts.context()}` : ""}`).toBe(0);
    const own = splitReceiverLines(r.output)
      .split("\n")
      .filter((l) => !isReceiverLine(l))
      .join("\n");
    output += own + (own.endsWith("\n") || own === "" ? "" : "\n");
  }
  return { block, output, ...(watch === undefined ? {} : { watch }) };
}

/** A watch's rows: the same columns as shown; each row one of the shown rows; the last row the shown last. */
export function expectSameWatch(actual: string, shown: string, what: string): void {
  const a = lines(actual);
  const s = lines(shown);
  const msg = `${what}\n--- actual ---\n${actual}\n--- shown ---\n${shown}`;
  expect(columns(a[0]!), msg).toEqual(columns(s[0]!));
  const shownRows = new Set(s.slice(1).map(skeleton));
  for (const row of a.slice(1)) expect(shownRows.has(skeleton(row)), `${msg}\nrow not shown: ${row}`).toBe(true);
  expect(skeleton(a.at(-1)!), msg).toBe(skeleton(s.at(-1)!));
}
