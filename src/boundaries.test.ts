// The import boundaries in eslint.config.js are rules nobody sees until they fire. This test
// makes each one fire: a probe file placed (in memory) in a layer imports what that layer may not,
// and the project's own lint config must refuse it; an allowed import must pass. Type-aware rules
// are switched off for the probes (they are not part of the TypeScript project).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
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
  ["src/core/probe.ts", "../kube/client.js", /src\/core is pure/, "./attempt/plan.js"],
  ["src/core/probe.ts", "undici", /src\/core is pure/, "./attempt/backoff.js"],
  ["src/core/attempt/probe.ts", "../../kube/client.js", /src\/core is pure/, "../rfc3339.js"],
  ["src/core/endpoint/probe.ts", "../../config/config.js", /src\/core is pure/, "../attempt/classify.js"],
  ["src/api/probe.ts", "../core/attempt/plan.js", /schema layer/, "./names.js"],
  ["src/lib/probe.ts", "../kube/client.js", /leaf of shared helpers/, "./sleep.js"],
  ["src/config/probe.ts", "../jetstream/jetstream.js", /only parses the environment/, "../jetstream/url.js"],
  ["src/config/probe.ts", "../transports/stream/pull.js", /only parses the environment/, "../core/attempt/plan.js"],
  ["src/jetstream/probe.ts", "../delivery/objects.js", /JetStream layer/, "../core/attempt/backoff.js"],
  ["src/kube/probe.ts", "../delivery/objects.js", /generic plumbing/, "../runtime/manager.js"],
  ["src/kube/probe.ts", "../replay/replay.js", /generic plumbing/, "../lib/sleep.js"],
  ["src/runtime/probe.ts", "../transports/stream/pull.js", /generic plumbing/, "../kube/client.js"],
  ["src/runtime/probe.ts", "../cli/operator.js", /generic plumbing/, "../kube/types.js"],
  ["src/delivery/probe.ts", "../cli/operator.js", /imports no feature/, "../kube/client.js"],
  ["src/delivery/probe.ts", "../transports/cr/delivery-reconciler.js", /imports no feature/, "./engine/attempt.js"],
  ["src/delivery/engine/probe.ts", "../../finished/terminal-index.js", /imports no feature/, "../objects.js"],
  ["src/finished/probe.ts", "../cli/operator.js", /Only the CLI wires/, "../delivery/objects.js"],
  ["src/replay/probe.ts", "../cli/operator.js", /Only the CLI wires/, "../finished/records.js"],
  ["src/subscriptions/probe.ts", "../cli/operator.js", /Only the CLI wires/, "../delivery/engine/endpoints.js"],
  ["src/transports/stream/probe.ts", "../../cli/operator.js", /Only the CLI wires/, "../../jetstream/consumers.js"],
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

/** Every module of src (tests aside) with the modules it imports (`import ... from`, `export ... from`, `import()`). */
function importGraph(root = "src"): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith(".ts") && !p.endsWith(".test.ts")) {
        const text = readFileSync(p, "utf8");
        const specs = [...text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"(\.{1,2}\/[^"]+)";/gms), ...text.matchAll(/\bimport\(\s*"(\.{1,2}\/[^"]+)"\s*\)/g)];
        const deps = specs.map((m) => normalize(join(dirname(p), m[1]!)).replace(/\.js$/, ".ts"));
        graph.set(p, deps);
      }
    }
  };
  walk(root);
  return graph;
}

/** The cycles of a graph: its strongly connected components of more than one module. */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1) found.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The modules `entry` loads before it runs: its static imports, transitively (no `import()`, no `import type`). */
function staticClosure(entry: string): { modules: Set<string>; packages: Set<string> } {
  const modules = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (modules.has(file)) return;
    modules.add(file);
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/^(?:import|export)\s(?!type\s)[^;]*?\sfrom\s+"([^"]+)";/gms)) {
      const spec = m[1]!;
      if (spec.startsWith(".")) visit(normalize(join(dirname(file), spec)).replace(/\.js$/, ".ts"));
      else if (!spec.startsWith("node:")) packages.add(spec);
    }
  };
  visit(entry);
  return { modules, packages };
}

describe("command-line start-up", () => {
  // --help and usage errors answer before the operator (0.6 s to load) or the Kubernetes
  // client's kubeconfig loader (0.5 s) is loaded: each command imports those once its
  // arguments are checked.
  it.each(["run-operator.ts", "demo-command.ts", "cluster.ts", "kubectl-hookline.ts", "publish.ts"])("src/cli/%s loads neither the operator nor @kubernetes/client-node before its usage checks", (file) => {
    const { modules, packages } = staticClosure(join("src", "cli", file));
    expect(modules.size).toBeGreaterThan(1);
    expect([...modules].filter((m) => m === join("src", "cli", "operator.ts") || m === join("src", "cli", "demo.ts"))).toEqual([]);
    expect([...packages].filter((p) => p.startsWith("@kubernetes/"))).toEqual([]);
  });

  it("sees a static import of the operator", () => {
    expect(staticClosure(join("src", "cli", "demo.ts")).modules).toContain(join("src", "cli", "operator.ts"));
    expect(staticClosure(join("src", "index.ts")).packages).toContain("@kubernetes/client-node");
  });
});

describe("the operator process", () => {
  // @kubernetes/client-node costs about 27 MiB of heap that every major collection marks: the
  // operator reads its kubeconfig itself (src/kube/kubeconfig.ts) and imports the library only
  // for a user with an exec plugin or an auth provider (docs/adr/0017-own-kubeconfig-reader.md).
  it("loads no @kubernetes/* package", () => {
    const { modules, packages } = staticClosure(join("src", "cli", "operator.ts"));
    expect(modules).toContain(join("src", "kube", "kubeconfig.ts"));
    expect([...packages].filter((p) => p.startsWith("@kubernetes/"))).toEqual([]);
  });

  it("only the kubeconfig reader (on demand) and the library entry import @kubernetes/client-node", () => {
    const importers: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (p.endsWith(".ts") && !p.endsWith(".test.ts") && /(?:from|import\()\s*"@kubernetes\/client-node"/.test(readFileSync(p, "utf8"))) importers.push(p);
      }
    };
    walk("src");
    expect(importers.sort()).toEqual([join("src", "index.ts"), join("src", "kube", "kubeconfig.ts")]);
    expect(readFileSync(join("src", "kube", "kubeconfig.ts"), "utf8")).not.toMatch(/^import[^;]*from\s+"@kubernetes\//m);
  });
});

describe("import graph", () => {
  it("finds a cycle when there is one", () => {
    const g = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]);
    expect(cycles(g)).toEqual([["a", "b", "c"]]);
  });

  it("src has no import cycle, counting the lazy import() of the OpenTelemetry module", () => {
    const graph = importGraph();
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get(join("src", "finished", "terminal-index.ts"))).toContain(join("src", "finished", "retention.ts"));
    expect(graph.get(join("src", "observability", "tracing.ts"))).toContain(join("src", "observability", "otel.ts"));
    expect(cycles(graph)).toEqual([]);
  });
});
