// docs/api.md is generated from catalogues that sit beside the code they describe; these tests
// make the catalogues fail when the code moves on without them.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ENV_DOCS } from "../config/config.js";
import { DRAIN_LOG_LINES } from "../observability/logger.js";
import { PLUGIN_OPTIONS } from "./kubectl-hookline.js";
import { PLUGIN_COMMANDS, PLUGIN_GLOBAL_FLAGS } from "./plugin-commands.js";

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8");

describe("reference catalogues", () => {
  it("ENV_DOCS lists every variable config.ts reads, and nothing else", () => {
    // The code, without the catalogues themselves.
    const text = read("../config/config.ts");
    const tracing = read("../config/tracing.ts");
    const src =
      text.slice(0, text.indexOf("export const ENV_DOCS")) +
      text.slice(text.indexOf("const LOG_LEVELS")) +
      read("../config/publish-door.ts") +
      read("../config/metrics-server.ts") +
      tracing.slice(0, tracing.indexOf("export const TRACING_ENV_DOCS"));
    const names = new Set<string>();
    for (const m of src.matchAll(/name: "([A-Z][A-Z0-9_]+)"/g)) names.add(m[1]!);
    for (const m of src.matchAll(/env\.([A-Z][A-Z0-9_]+)/g)) names.add(m[1]!);
    for (const m of src.matchAll(/(?:oneOf|bool)\("([A-Z][A-Z0-9_]+)"/g)) names.add(m[1]!);
    // tracing.ts names a variable and its signal-specific form in one ternary, and reads milliseconds() by name.
    for (const m of tracing.slice(0, tracing.indexOf("export const TRACING_ENV_DOCS")).matchAll(/"(OTEL_[A-Z0-9_]+)"/g)) names.add(m[1]!);
    expect(ENV_DOCS.map((e) => e.name).sort()).toEqual([...names].sort());
  });

  it("every option kubectl hookline parses is in PLUGIN_COMMANDS or PLUGIN_GLOBAL_FLAGS (by its long or short name)", () => {
    // test/integration/cli-reference.test.ts checks the other way round: every documented flag is accepted.
    const documented = [...PLUGIN_COMMANDS.map((c) => c.usage), ...PLUGIN_GLOBAL_FLAGS.map((f) => f.flag)].join(" ");
    const names = (flag: string) => new RegExp(`(^|[\\s\\[])${flag}(?![\\w-])`).test(documented);
    for (const [name, option] of Object.entries(PLUGIN_OPTIONS)) {
      expect(names(`--${name}`) || (option.short !== undefined && names(`-${option.short}`)), `--${name}${option.short ? ` (-${option.short})` : ""} is not documented`).toBe(true);
    }
  });

  it("every documented shutdown log line is written by the drain report", () => {
    const drain = read("../delivery/drain.ts");
    for (const line of DRAIN_LOG_LINES) expect(drain, line.msg).toContain(`msg: "${line.msg}"`);
  });
});
