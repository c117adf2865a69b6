import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const logger = fileURLToPath(new URL("./logger.ts", import.meta.url));

/** Runs `body` in a fresh Node process with `createLogger` imported; its stdout lines. */
function run(body: string): string[] {
  const script = `import { createLogger, fixedFieldsLogger } from ${JSON.stringify(logger)};\n${body}`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000, maxBuffer: 64 * 1024 * 1024 });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.split("\n").filter(Boolean);
}

describe("createLogger on standard output (asynchronous writes)", () => {
  it("loses no line when the process exits at once after logging 5,000 of them (the exit flush)", () => {
    const lines = run(`const log = createLogger({ level: "info" });\nfor (let i = 0; i < 5000; i++) log.info({ i, text: "é€😀".repeat(20) }, "webhook_attempt");\nprocess.exit(0);`);
    expect(lines).toHaveLength(5000);
    const parsed = lines.map((l) => JSON.parse(l) as { i: number; msg: string; text: string });
    expect(parsed.map((p) => p.i)).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(parsed.every((p) => p.msg === "webhook_attempt" && p.text === "é€😀".repeat(20))).toBe(true);
  });

  it("still redacts secrets", () => {
    const [line] = run(`createLogger().info({ secret: "s3cr3t", headers: { authorization: "Bearer x" } }, "hi");`);
    expect(line).not.toContain("s3cr3t");
    expect(line).not.toContain("Bearer x");
    expect(JSON.parse(line!)).toMatchObject({ secret: "[redacted]", msg: "hi", level: "info" });
  });

  it("the attempt line's logger (no redaction, its fields are built by the engine) writes the same line shape, and the root and its other children still redact", () => {
    const [attempt, root, other] = run(
      `const log = createLogger();\nconst a = fixedFieldsLogger(log, { component: "attempt" });\n` +
        `a.info({ eventId: "evt-1", endpoint: "https://example.com/[redacted]", status: 200 }, "webhook_attempt");\n` +
        `log.info({ secret: "s3cr3t" }, "root");\nlog.child({ component: "x" }).info({ token: "t0k3n" }, "child");`,
    );
    expect(JSON.parse(attempt!)).toMatchObject({ level: "info", name: "hookline", component: "attempt", eventId: "evt-1", endpoint: "https://example.com/[redacted]", status: 200, msg: "webhook_attempt" });
    expect(JSON.parse(attempt!)).toHaveProperty("pid");
    expect(JSON.parse(attempt!)).toHaveProperty("time");
    expect(root).not.toContain("s3cr3t");
    expect(other).not.toContain("t0k3n");
  });
});
