// The import boundaries in eslint.config.js are rules nobody sees until they fire. This test
// makes each one fire: a probe file placed (in memory) in a layer imports what that layer may not,
// and the project's own lint config must refuse it; an allowed import must pass. Type-aware rules
// are switched off for the probes (they are not part of the TypeScript project).
import { ESLint } from "eslint";
import tseslint from "typescript-eslint";
import { beforeAll, describe, expect, it } from "vitest";

let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({
    cwd: process.cwd(),
    overrideConfig: [{ files: ["**/*.ts"], ...tseslint.configs.disableTypeChecked }],
  });
}, 30_000);

async function restricted(file: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: file });
  return result!.messages.filter((m) => m.ruleId === "no-restricted-imports").map((m) => m.message);
}

/** [layer probe file, a forbidden import, the message's words, an allowed import]. */
const CASES: [string, string, RegExp, string][] = [
  ["src/core/probe.ts", "../kube/client.js", /src\/core is pure/, "./plan.js"],
  ["src/core/probe.ts", "undici", /src\/core is pure/, "./backoff.js"],
  ["src/api/probe.ts", "../core/plan.js", /schema layer/, "./names.js"],
  ["src/lib/probe.ts", "../kube/client.js", /leaf of shared helpers/, "./sleep.js"],
  ["src/config/probe.ts", "../stream/jetstream.js", /only parses the environment/, "../stream/url.js"],
  ["src/stream/probe.ts", "../delivery/objects.js", /JetStream layer/, "../core/backoff.js"],
  ["src/kube/probe.ts", "../delivery/objects.js", /generic plumbing/, "../runtime/manager.js"],
  ["src/runtime/probe.ts", "../cli/operator.js", /generic plumbing/, "../kube/types.js"],
  ["src/delivery/probe.ts", "../cli/operator.js", /Only the CLI wires/, "../kube/client.js"],
];

describe("eslint import boundaries", () => {
  it.each(CASES)("%s may not import %s", async (file, forbidden, message, allowed) => {
    const refused = await restricted(file, `import { x } from "${forbidden}";\nexport const y = x;\n`);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatch(message);
    expect(await restricted(file, `import { x } from "${allowed}";\nexport const y = x;\n`)).toEqual([]);
  }, 30_000);

  it("only src/observability/otel.ts imports @opentelemetry/*", async () => {
    const probe = `import { trace } from "@opentelemetry/api";\nexport const t = trace;\n`;
    const [bad] = await eslint.lintText(probe, { filePath: "src/delivery/probe.ts" });
    expect(bad!.messages.map((m) => m.ruleId)).toContain("no-restricted-syntax");
    const [ok] = await eslint.lintText(probe, { filePath: "src/observability/otel.ts" });
    expect(ok!.messages.map((m) => m.ruleId)).not.toContain("no-restricted-syntax");
  }, 30_000);
});
