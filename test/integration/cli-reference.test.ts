// docs/api.md's "Command line" section as a contract: every `hookline ...` and
// `kubectl hookline ...` row of its command tables and every flag of its flags table, checked
// against the built bins run as a user runs them (node bin/hookline.js, node
// bin/kubectl-hookline.js, as child processes).
//
// Nothing here uses the test cluster. The kubeconfig (and every --nats URL) points at a local
// TCP listener that counts connections and closes them: a usage error must leave that count at
// zero, and a complete command must fail reaching it (exit 1). dev, cluster up and demo run
// without Go and with an empty binary cache, so even a missed usage check could not start a
// control plane; they are only run as far as their usage checks.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec, type ExecResult } from "../helpers/exec.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BINS = { hookline: join(ROOT, "bin/hookline.js"), "kubectl hookline": join(ROOT, "bin/kubectl-hookline.js") } as const;
type Bin = keyof typeof BINS;
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };

// ---- docs/api.md ---------------------------------------------------------------------------

interface Table {
  header: string[];
  rows: string[][];
}

/** The markdown tables of `text`; cells unescaped (`\|` is `|`), backticks removed. */
function tablesOf(text: string): Table[] {
  const lines = text.split("\n");
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, "")
      .split(/(?<!\\)\|/)
      .map((c) => c.trim().replace(/\\\|/g, "|").replace(/^`|`$/g, ""));
  const tables: Table[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith("|") || !/^\|\s*---/.test(lines[i + 1]!)) continue;
    const table: Table = { header: cells(lines[i]!), rows: [] };
    for (i += 2; i < lines.length && lines[i]!.startsWith("|"); i++) table.rows.push(cells(lines[i]!));
    tables.push(table);
  }
  return tables;
}

const API_MD = readFileSync(join(ROOT, "docs/api.md"), "utf8");
const SECTION_START = API_MD.indexOf("\n## Command line\n");
const SECTION_END = API_MD.indexOf("\n## ", SECTION_START + 1);
const TABLES = SECTION_START < 0 ? [] : tablesOf(API_MD.slice(SECTION_START, SECTION_END < 0 ? undefined : SECTION_END));

interface Flag {
  /** As documented in the row: `-n`, `--reason`. */
  name: string;
  /** The placeholder or example after it (NS, "...", 1h), or the inline value of `--flag=value`. */
  value?: string;
  inline: boolean;
  optional: boolean;
  /** The optional flags it is nested in: `[--wait [--timeout 2m]]` makes --wait the parent of --timeout. */
  parents: Flag[];
}

interface Row {
  bin: Bin;
  /** The row's usage as documented. */
  text: string;
  /** The command words: ["cluster", "up"]. */
  words: string[];
  flags: Flag[];
  positionals: Array<{ name: string; optional: boolean }>;
}

/** A usage string such as `replay DELIVERY --reason "..." [--wait [--timeout 2m]]`, taken apart. */
function parseUsage(bin: Bin, text: string): Row {
  const row: Row = { bin, text, words: [], flags: [], positionals: [] };
  let depth = 0;
  /** The first flag opened at each bracket depth. */
  const owners: Array<Flag | undefined> = [];
  let previous: Flag | undefined;
  for (const raw of text.split(/\s+/)) {
    const opens = /^\[*/.exec(raw)![0].length;
    const closes = /\]*$/.exec(raw)![0].length;
    const token = raw.slice(opens, raw.length - closes);
    const takesValue = previous !== undefined && opens === 0 && !token.startsWith("-");
    depth += opens;
    for (let d = depth - opens + 1; d <= depth; d++) owners[d] = undefined;
    if (takesValue) {
      previous!.value = token;
      previous = undefined;
    } else if (token.startsWith("-")) {
      const [name, inlineValue] = token.split("=", 2) as [string, string | undefined];
      const flag: Flag = { name, inline: inlineValue !== undefined, optional: depth > 0, parents: owners.slice(1, depth).filter((f): f is Flag => f !== undefined) };
      if (inlineValue !== undefined) flag.value = inlineValue;
      if (depth > 0 && !owners[depth]) owners[depth] = flag;
      row.flags.push(flag);
      previous = closes === 0 && inlineValue === undefined ? flag : undefined;
    } else if (depth === 0 && row.flags.length === 0 && row.positionals.length === 0 && /^[a-z][a-z-]*$/.test(token)) {
      row.words.push(token);
      previous = undefined;
    } else {
      row.positionals.push({ name: token, optional: depth > 0 });
      previous = undefined;
    }
    depth -= closes;
  }
  if (depth !== 0) throw new Error(`docs/api.md: unbalanced brackets in ${bin} ${text}`);
  return row;
}

const commandTable = (bin: Bin) => TABLES.find((t) => t.header.join() === "command,what" && t.rows.every((r) => r[0]!.startsWith(`${bin} `)));
const HOOKLINE_ROWS = (commandTable("hookline")?.rows ?? []).map((r) => parseUsage("hookline", r[0]!.slice("hookline ".length)));
const PLUGIN_ROWS = (commandTable("kubectl hookline")?.rows ?? []).map((r) => parseUsage("kubectl hookline", r[0]!.slice("kubectl hookline ".length)));
const FLAGS_TABLE = TABLES.find((t) => t.header.join() === "flag,what")?.rows ?? [];
const EXIT_TABLE = TABLES.find((t) => t.header.join() === "code,meaning")?.rows ?? [];
const PLUGIN_COMMAND_NAMES = new Set(PLUGIN_ROWS.map((r) => r.words[0]!));

/** The flags table: `-n, --namespace NS` is names [-n, --namespace] with value NS; `(dlq)` at the end of `what` limits it to dlq. */
const GLOBAL_FLAGS = FLAGS_TABLE.map(([flag, what]) => {
  const parts = flag!.split(/,?\s+/);
  const names = parts.filter((p) => p.startsWith("-"));
  const value = parts.find((p) => !p.startsWith("-"));
  const only = /\(([a-z, ]+)\)\s*$/.exec(what!)?.[1]?.split(/,\s*/);
  return { names, value, only: only?.every((c) => PLUGIN_COMMAND_NAMES.has(c)) ? only : undefined };
});

/** Short and long names of one flag, from the flags table and the --help texts: `-n, --namespace`. */
const ALIASES = new Map<string, string>();
const learnAliases = (text: string) => {
  for (const m of text.matchAll(/(?:^|[\s,])(-[a-zA-Z]),\s+(--[a-z][\w-]*)/gm)) {
    ALIASES.set(m[1]!, m[2]!);
    ALIASES.set(m[2]!, m[1]!);
  }
};
for (const g of GLOBAL_FLAGS) learnAliases(g.names.join(", "));
const longName = (name: string) => (name.startsWith("--") ? name : ALIASES.get(name) ?? name);

/** Commands that start processes or run until a signal: only run as far as their usage checks. */
const SIDE_EFFECTS = new Set(["operator", "dev", "cluster", "demo"]);

// ---- the environment ----------------------------------------------------------------------

interface Listener {
  server: Server;
  port: number;
  connections: number;
}

async function listen(): Promise<Listener> {
  const l: Listener = { server: createServer((socket) => ((l.connections += 1), socket.destroy())), port: 0, connections: 0 };
  await new Promise<void>((resolve) => l.server.listen(0, "127.0.0.1", resolve));
  l.port = (l.server.address() as AddressInfo).port;
  return l;
}

const kubeconfigFor = (port: number) => `apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster:
    server: https://127.0.0.1:${port}
    insecure-skip-tls-verify: true
users:
- name: someone
  user:
    token: not-a-token
contexts:
- name: reference
  context: {cluster: nowhere, user: someone, namespace: shop}
current-context: reference
`;

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/** Bad values by flag (long name), each a usage error the message of which names the flag. */
const BAD: Record<string, string> = {
  "--leader-elect": "maybe",
  "--dir": "",
  "--namespace": "Not_A_Namespace",
  "--type": "order paid",
  "--id": "",
  "--data": "{not json",
  "--traceparent": "garbage",
  "--tracestate": "a=1,a=2",
  "--nats": "http://127.0.0.1:4222",
  "--nats-nodes": "2",
  "--output": "xml",
  "--context": "nope",
  "--reason": "oops",
  "--since": "soon",
  "--timeout": "soon",
  "--concurrency": "99",
};
/** Flags with no bad value that is a usage error: an unreadable --kubeconfig is a failure (exit 1), any name can be looked up. */
const NO_BAD_VALUE = new Set(["--kubeconfig", "--subscription", "--reason@dlq"]);
/** Stderr that shows a kubeconfig was read or a connection tried. */
const CONTACT = /cannot read the kubeconfig|no kubeconfig|ENOENT|ECONNREFUSED|ECONNRESET|secure TLS|TLS connection|certificate|socket|other side closed|cannot reach NATS|HTTP protocol/i;

describe("the command line as docs/api.md documents it", () => {
  let forbidden: Listener;
  let sink: Listener;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  /** Where a usage error must not go (KUBECONFIG and --nats of every usage-error run). */
  let forbiddenKubeconfig: string;
  /** Where a complete command goes and fails. */
  let sinkKubeconfig: string;
  const codes = new Set<number>();

  beforeAll(async () => {
    [forbidden, sink] = await Promise.all([listen(), listen()]);
    dir = mkdtempSync(join(tmpdir(), "cli-reference-"));
    forbiddenKubeconfig = join(dir, "forbidden-kubeconfig");
    sinkKubeconfig = join(dir, "sink-kubeconfig");
    writeFileSync(forbiddenKubeconfig, kubeconfigFor(forbidden.port));
    writeFileSync(sinkKubeconfig, kubeconfigFor(sink.port));
    // node's directory only on PATH: no go, no kubectl; an empty binary cache; a HOME of nothing.
    env = { PATH: dirname(process.execPath), HOME: mkdtempSync(join(dir, "home-")), HOOKLINE_CACHE_DIR: mkdtempSync(join(dir, "cache-")), KUBECONFIG: forbiddenKubeconfig };
    // The short and long names of each hookline command's flags (-t, --type), from its --help:
    // the tables show one name, messages name the long one. kubectl hookline publish is hookline publish.
    const words = [...new Set(HOOKLINE_ROWS.filter((r) => r.words.length > 0).map((r) => r.words[0]!))];
    for (const r of await pool(words.map((w) => () => run("hookline", [w, "--help"])))) learnAliases(r.stdout);
  });
  afterAll(async () => {
    for (const l of [forbidden, sink]) await new Promise<void>((resolve) => (l ? l.server.close(() => resolve()) : resolve()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = async (bin: Bin, args: string[], opts: { kubeconfig?: string | null } = {}): Promise<ExecResult> => {
    const childEnv = { ...env };
    if (opts.kubeconfig === null) delete childEnv.KUBECONFIG;
    else if (opts.kubeconfig !== undefined) childEnv.KUBECONFIG = opts.kubeconfig;
    const r = await exec(process.execPath, [BINS[bin], ...args], { env: childEnv, cwd: dir, timeoutMs: 60_000 });
    codes.add(r.code);
    return r;
  };
  /** Runs `jobs` two at a time (the machine is shared). */
  const pool = async <T>(jobs: Array<() => Promise<T>>): Promise<T[]> => {
    const results: T[] = [];
    let next = 0;
    const worker = async () => {
      while (next < jobs.length) {
        const i = next++;
        results[i] = await jobs[i]!();
      }
    };
    await Promise.all([worker(), worker()]);
    return results;
  };

  /** A valid value of a flag: its documented example (1h, 60s, false), else a sample by name. */
  const sample = (flag: Flag, target: "forbidden" | "sink"): string | undefined => {
    if (flag.value === undefined) return undefined;
    if (flag.inline || /^\d+[smh]$/.test(flag.value)) return flag.value;
    const samples: Record<string, string> = {
      "--namespace": "shop",
      "--type": "order.paid",
      "--id": "evt-1001",
      "--data": '{"order": 1001}',
      "--traceparent": TRACEPARENT,
      "--tracestate": "rojo=1",
      "--kubeconfig": target === "sink" ? sinkKubeconfig : forbiddenKubeconfig,
      "--context": "reference",
      "--output": "json",
      "--nats": `nats://127.0.0.1:${(target === "sink" ? sink : forbidden).port}`,
      "--dir": join(dir, "state"),
      "--nats-nodes": "3",
      "--reason": "endpoint fixed, INC-42",
      "--subscription": "acme",
      "--concurrency": "2",
    };
    const value = samples[longName(flag.name)];
    expect(value, `no sample value for ${flag.name} ${flag.value}: add one to this test`).toBeDefined();
    return value;
  };
  const argsOf = (flag: Flag, value: string | undefined): string[] => (value === undefined ? [flag.name] : flag.inline ? [`${flag.name}=${value}`] : [flag.name, value]);
  const positionalSample = (name: string): string => {
    const samples: Record<string, string> = { SUB: "acme", DELIVERY: "acme-evt-1001", "NAMESPACE...": "shop" };
    expect(samples[name], `no sample value for ${name}: add one to this test`).toBeDefined();
    return samples[name]!;
  };
  /** The row's command with every required positional and flag, and `extra` (flags with their parents). */
  const complete = (row: Row, target: "forbidden" | "sink", opts: { without?: string; extra?: Flag[]; values?: Map<Flag, string> } = {}): string[] => {
    const args = [...row.words];
    for (const p of row.positionals) if (!p.optional && p.name !== opts.without) args.push(positionalSample(p.name));
    const flags = [...row.flags.filter((f) => !f.optional && f.name !== opts.without)];
    for (const f of opts.extra ?? []) for (const g of [...f.parents, f]) if (!flags.includes(g)) flags.push(g);
    for (const f of flags) args.push(...argsOf(f, opts.values?.has(f) ? opts.values.get(f) : sample(f, target)));
    return args;
  };
  /** The row's line of the usage lines on stderr: `usage: hookline cluster up ...`, or indented below it. */
  const usageLine = (row: Row) => new RegExp(`^(usage:| {6}) ${row.bin} ${row.words.join(" ")}( |$)`, "m");
  const expectUsageError = (row: Row, args: string[], r: ExecResult, problem: RegExp) => {
    const what = `${row.bin} ${args.join(" ")}`;
    expect(r.code, `${what}\n${r.stderr}`).toBe(2);
    expect(r.stderr, what).toMatch(problem);
    expect(r.stderr, what).toMatch(usageLine(row));
    expect(r.stderr, what).not.toMatch(CONTACT);
    expect(r.stdout, what).toBe("");
  };

  it("docs/api.md has the tables this test reads", () => {
    expect(HOOKLINE_ROWS.length, "the `hookline` command table").toBeGreaterThan(3);
    expect(PLUGIN_ROWS.length, "the `kubectl hookline` command table").toBeGreaterThan(3);
    expect(GLOBAL_FLAGS.length, "the flags table").toBeGreaterThan(3);
    expect(EXIT_TABLE.map((r) => Number(r[0]))).toEqual(expect.arrayContaining([0, 1, 2]));
    expect(HOOKLINE_ROWS.map((r) => r.text)).toContain("--version");
    expect(GLOBAL_FLAGS.map((f) => f.names.join(", "))).toContain("--version");
  });

  it("--version exits 0 on both entry points", async () => {
    const [h, k] = await pool([() => run("hookline", ["--version"]), () => run("kubectl hookline", ["--version"], { kubeconfig: null })]);
    expect(h).toMatchObject({ code: 0, stdout: `hookline ${version}\n`, stderr: "" });
    expect(k).toMatchObject({ code: 0, stdout: `kubectl-hookline ${version}\n`, stderr: "" });
  });

  describe.each([...HOOKLINE_ROWS.filter((r) => r.words.length > 0), ...PLUGIN_ROWS].map((r) => [`${r.bin} ${r.text}`, r] as const))("%s", (_, row) => {
    const command = `${row.bin} ${row.words.join(" ")}`;
    const sideEffects = row.bin === "hookline" && SIDE_EFFECTS.has(row.words[0]!);
    /** The flags table's flags that apply to this command (none for hookline). */
    const globals = () => (row.bin === "kubectl hookline" ? GLOBAL_FLAGS.filter((g) => g.value !== undefined || g.names.some((n) => n !== "--version" && n !== "--help" && n !== "-h")).filter((g) => !g.only || g.only.includes(row.words[0]!)) : []);
    const globalFlag = (g: (typeof GLOBAL_FLAGS)[number], name: string): Flag => ({ name, inline: false, optional: true, parents: [], ...(g.value !== undefined ? { value: g.value } : {}) });

    it("exists: --help exits 0 with its usage and every documented flag, and the parser takes them all", async () => {
      // Every documented flag with a valid value, and --help: an unknown one fails the parse (exit 2).
      const withFlags = [...complete(row, "forbidden", { extra: row.flags.filter((f) => f.optional) }), ...globals().flatMap((g) => argsOf(globalFlag(g, g.names[0]!), sample(globalFlag(g, g.names[0]!), "forbidden"))), "--help"];
      const runs = [[...row.words, "--help"], withFlags];
      const results = await pool(runs.map((args) => () => run(row.bin, args)));
      const help = results[0]!;
      for (const [i, args] of runs.entries()) {
        const r = results[i]!;
        expect(r.code, `${row.bin} ${args.join(" ")}\n${r.stderr}`).toBe(0);
        expect(r.stderr).not.toMatch(/Unknown option/);
        expect(r.stdout).toContain(command);
      }
      for (const f of row.flags) expect(help.stdout, `${command} --help names ${f.name}`).toMatch(new RegExp(`(^|[\\s\\[,])${f.name}(?![\\w-])`, "m"));
      if (row.bin === "hookline") {
        // The other way round: a flag --help offers is documented for this command (long or short name).
        const documented = new Set(HOOKLINE_ROWS.filter((r) => r.words[0] === row.words[0]).flatMap((r) => r.flags.flatMap((f) => [f.name, longName(f.name)])));
        for (const m of help.stdout.matchAll(/(?<![\w-])--[a-z][\w-]*/g)) {
          if (m[0] === "--help") continue;
          expect(documented.has(m[0]) || documented.has(ALIASES.get(m[0]) ?? ""), `${command} --help offers ${m[0]}, which docs/api.md does not list for ${row.words[0]}`).toBe(true);
        }
      }
      expect(forbidden.connections).toBe(0);
    });

    it("an unknown flag exits 2 with a usage line, sending nothing", async () => {
      const args = [...complete(row, "forbidden"), "--no-such-flag"];
      expectUsageError(row, args, await run(row.bin, args), /Unknown option '--no-such-flag'/);
      expect(forbidden.connections).toBe(0);
    });

    it("a missing required argument exits 2 naming it, before any kubeconfig or connection", async () => {
      const required = [...row.positionals.filter((p) => !p.optional).map((p) => ({ name: p.name, shows: p.name })), ...row.flags.filter((f) => !f.optional).map((f) => ({ name: f.name, shows: longName(f.name) }))];
      const cases = required.map(({ name, shows }) => ({ args: complete(row, "forbidden", { without: name }), shows }));
      // A subcommand word (cluster up) is required too.
      if (row.words.length > 1) cases.push({ args: row.words.slice(0, -1), shows: row.words.at(-1)! });
      const results = await pool(cases.map((c) => () => run(row.bin, c.args)));
      cases.forEach((c, i) => expectUsageError(row, c.args, results[i]!, new RegExp(c.shows.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))));
      expect(forbidden.connections).toBe(0);
    });

    it("a bad flag value exits 2 naming the flag, sending nothing", async () => {
      const own = row.flags.filter((f) => !NO_BAD_VALUE.has(longName(f.name)) && !NO_BAD_VALUE.has(`${longName(f.name)}@${row.words[0]}`) && f.value !== undefined);
      // The flags table's flags once, with the first command.
      const withGlobals = row === PLUGIN_ROWS[0] ? globals().filter((g) => g.value !== undefined).map((g) => globalFlag(g, g.names.at(-1)!)) : [];
      const cases = [...own, ...withGlobals.filter((f) => !NO_BAD_VALUE.has(longName(f.name)))].map((flag) => {
        const bad = BAD[longName(flag.name)];
        expect(bad, `no bad value for ${flag.name}: add one to BAD (or NO_BAD_VALUE) in this test`).toBeDefined();
        return { flag, args: complete(row, "forbidden", { extra: [flag], values: new Map([[flag, bad!]]) }) };
      });
      const results = await pool(cases.map((c) => () => run(row.bin, c.args)));
      cases.forEach((c, i) => expectUsageError(row, c.args, results[i]!, new RegExp(`${longName(c.flag.name)}\\b`)));
      expect(forbidden.connections).toBe(0);
    });

    // Commands that start processes (operator, dev, cluster, demo) are not run in their valid
    // form here: their own tests run them (cluster.test.ts, demo.test.ts, the README tests).
    if (!sideEffects) it("the documented form, and each optional flag with it, gets past the usage checks and fails only reaching the cluster (exit 1)", async () => {
      const before = sink.connections;
      const groups: Flag[][] = [[]];
      // Each optional flag on its own (nested ones with their parents; a parent alone is covered by its child).
      for (const f of row.flags.filter((f) => f.optional)) if (!row.flags.some((g) => g.parents.includes(f))) groups.push([f]);
      // The flags table's flags together, by their other name.
      const table = globals().map((g) => globalFlag(g, g.names.at(-1)!));
      if (table.length) groups.push(table);
      const cases = groups.map((extra) => complete(row, "sink", { extra }));
      const results = await pool(cases.map((args) => () => run(row.bin, args, { kubeconfig: sinkKubeconfig })));
      cases.forEach((args, i) => {
        const r = results[i]!;
        expect(r.code, `${row.bin} ${args.join(" ")}\n${r.stderr}`).toBe(1);
        expect(r.stderr, args.join(" ")).toMatch(/ECONNRESET|socket|TLS|other side closed|cannot reach NATS/i);
        expect(r.stderr, args.join(" ")).not.toMatch(/^usage:/m);
      });
      expect(sink.connections).toBeGreaterThanOrEqual(before + cases.length);
      expect(forbidden.connections).toBe(0);
    });
  });

  it("kubectl hookline with no kubeconfig at all, or a missing one: a usage error is still a usage error", async () => {
    const cases: Array<[string[], string | null]> = [
      [["status"], null],
      [["status"], join(dir, "no-such-kubeconfig")],
      [["replay", "acme-evt-1001"], join(dir, "no-such-kubeconfig")],
    ];
    const results = await pool(cases.map(([args, kubeconfig]) => () => run("kubectl hookline", args, { kubeconfig })));
    cases.forEach(([args], i) => {
      const r = results[i]!;
      expect(r.code, `${args.join(" ")}\n${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/^usage: kubectl hookline /m);
      expect(r.stderr).not.toMatch(CONTACT);
    });
    // A complete command without a kubeconfig says so, as a failure.
    const r = await run("kubectl hookline", ["status", "acme"], { kubeconfig: null });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no kubeconfig: KUBECONFIG is not set/);
  });

  it("-h is --help, for every hookline command and for kubectl hookline", async () => {
    const cases: Array<[Bin, string[]]> = [...new Set(HOOKLINE_ROWS.filter((r) => r.words.length > 0).map((r) => r.words[0]!))].map((w) => ["hookline", [w, "-h"]]);
    cases.push(["kubectl hookline", [PLUGIN_ROWS[0]!.words[0]!, "-h"]], ["kubectl hookline", ["-h"]]);
    const results = await pool(cases.map(([bin, args]) => () => run(bin, args)));
    cases.forEach(([bin, args], i) => {
      expect(results[i]!.code, `${bin} ${args.join(" ")}`).toBe(0);
      expect(results[i]!.stdout).toMatch(new RegExp(`^usage: ${bin} ${args.length > 1 ? args[0] : ""}`, "m"));
    });
  });

  it("an unknown command exits 2 on both entry points", async () => {
    for (const r of await pool([() => run("hookline", ["no-such-command"]), () => run("kubectl hookline", ["no-such-command"])])) {
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/unknown command "no-such-command"/);
      expect(r.stderr).toMatch(/^usage: /m);
    }
  });

  it("every exit code seen here is in the exit code table", () => {
    expect([...codes].sort()).toEqual(expect.arrayContaining([0, 1, 2]));
    for (const code of codes) expect(EXIT_TABLE.map((r) => Number(r[0])), `exit code ${code}`).toContain(code);
    expect(forbidden.connections).toBe(0);
  });
});
