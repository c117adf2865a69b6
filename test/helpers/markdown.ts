// Reads the commands and outputs a document shows, so a test can run them as written: fenced
// blocks by section, shell blocks split into commands (heredocs and continued lines kept whole),
// and the console block that follows a shell block, which is that block's shown output.
import { readFileSync } from "node:fs";

export interface Block {
  /** The info string's first word: sh, console, yaml... */
  lang: string;
  text: string;
  /** The nearest heading above it (without the #s). */
  section: string;
  /** 1-based line of the opening fence. */
  line: number;
}

export function fencedBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split("\n");
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^#{1,6}\s+(.*)$/.exec(lines[i]!);
    if (heading) {
      section = heading[1]!.trim();
      continue;
    }
    const open = /^(`{3,})\s*(\S*)/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[1]!;
    const body: string[] = [];
    const start = i + 1;
    for (i++; i < lines.length && !lines[i]!.startsWith(fence); i++) body.push(lines[i]!);
    blocks.push({ lang: open[2] ?? "", text: body.join("\n"), section, line: start });
  }
  return blocks;
}

export function readBlocks(path: string): Block[] {
  return fencedBlocks(readFileSync(path, "utf8"));
}

/** The blocks of the sections whose heading starts with `heading`, in order. */
export function sectionBlocks(blocks: Block[], heading: string): Block[] {
  const found = blocks.filter((b) => b.section.startsWith(heading));
  if (found.length === 0) throw new Error(`no fenced block under a heading starting with "${heading}"`);
  return found;
}

/**
 * A shell block as the commands a user types: a line continued with a backslash and a heredoc
 * (`<<'END'` ... `END`) belong to the command that starts them. Comments and blank lines are
 * dropped; trailing comments stay (the shell ignores them).
 */
export function shellCommands(text: string): string[] {
  const out: string[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const first = lines[i]!;
    if (first.trim() === "" || first.trim().startsWith("#")) continue;
    const command = [first];
    let line = first;
    // A continued line, then perhaps a heredoc that runs to its end word.
    while (line.endsWith("\\") && i + 1 < lines.length) {
      line = lines[++i]!;
      command.push(line);
    }
    const end = /<<-?\s*'?"?([A-Za-z_][A-Za-z0-9_]*)'?"?/.exec(command.join("\n"))?.[1];
    while (end !== undefined && i + 1 < lines.length) {
      command.push(lines[++i]!);
      if (lines[i]!.trim() === end) break;
    }
    out.push(command.join("\n"));
  }
  return out;
}

/** Splits a table as kubectl prints it (columns apart by two or more spaces). */
export function columns(line: string): string[] {
  return line.trim().split(/\s{2,}/);
}
