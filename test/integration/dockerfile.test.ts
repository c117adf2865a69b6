// The Dockerfile without a container engine: its shape (multi-stage, npm ci + build, production
// dependencies only in a distroless runtime stage, non-root, exec-form ENTRYPOINT, a current LTS
// Node), every path it COPYies exists after `npm run build` and is not excluded by
// .dockerignore, and the ENTRYPOINT started from the same layout (the copied paths, production
// node_modules from `npm ci --omit=dev`, the image's Node from hack/node-lts.sh, WORKDIR as cwd,
// only the image's ENV plus what a pod gets) answers /healthz and /readyz against the real API
// server, serves /metrics, and exits 0 on SIGTERM.
import { spawn } from "node:child_process";
import { cpSync, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePorts } from "../../src/cluster/ports.js";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { ROOT } from "../helpers/helm.js";
import { testTools } from "../helpers/tools.js";

interface Copy {
  from?: string;
  sources: string[];
  dest: string;
}
interface Stage {
  base: string;
  name: string;
  workdir: string;
  runs: string[];
  copies: Copy[];
  env: Record<string, string>;
  user?: string;
  entrypoint?: string[];
}

function parseDockerfile(text: string): { args: Record<string, string>; stages: Stage[] } {
  const lines = text.replace(/\\\n/g, " ").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of lines) {
    const [, instr, rest] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    const st = stages.at(-1);
    switch (instr?.toUpperCase()) {
      case "ARG": {
        const [k, v] = rest!.split("=");
        if (!st) args[k!] = v ?? "";
        break;
      }
      case "FROM": {
        const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest!)!;
        const base = m[1]!.replace(/\$\{(\w+)\}/g, (_, k: string) => args[k] ?? "");
        stages.push({ base, name: m[2] ?? String(stages.length), workdir: "/", runs: [], copies: [], env: {} });
        break;
      }
      case "WORKDIR":
        st!.workdir = rest!.startsWith("/") ? rest! : join(st!.workdir, rest!);
        break;
      case "RUN":
        st!.runs.push(rest!);
        break;
      case "ENV": {
        const [k, v] = rest!.split("=");
        st!.env[k!] = v!;
        break;
      }
      case "USER":
        st!.user = rest!;
        break;
      case "ENTRYPOINT":
        st!.entrypoint = JSON.parse(rest!) as string[];
        break;
      case undefined:
      default:
        break;
      case "COPY": {
        const parts = rest!.split(/\s+/);
        const from = parts.find((p) => p.startsWith("--from="))?.slice("--from=".length);
        const paths = parts.filter((p) => !p.startsWith("--"));
        const dest = paths.pop()!;
        st!.copies.push({ ...(from ? { from } : {}), sources: paths, dest: dest.startsWith("/") ? dest : join(st!.workdir, dest) });
        break;
      }
    }
  }
  return { args, stages };
}

/** .dockerignore semantics (last matching pattern wins, `!` re-includes, ** spans folders). */
function dockerIgnored(patterns: string[], path: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith("!");
    const glob = negate ? raw.slice(1) : raw;
    const re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*\*\/?/g, "%ANY%").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]").replace(/%ANY%/g, ".*")}$`);
    if (re.test(path)) ignored = !negate;
  }
  return ignored;
}

function filesUnder(dir: string): string[] {
  return statSync(dir).isDirectory() ? readdirSync(dir).flatMap((f) => filesUnder(join(dir, f))) : [dir];
}

const { args, stages } = parseDockerfile(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
const runtime = stages.at(-1)!;
const stageByName = (name: string) => stages.find((s) => s.name === name)!;

describe("Dockerfile", () => {
  it("is multi-stage: npm ci and build first, production dependencies only, a distroless non-root runtime", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages[0]!;
    expect(build.runs.some((r) => /^npm ci\b/.test(r) && !/--omit=dev/.test(r))).toBe(true);
    expect(build.runs.some((r) => /npm run build/.test(r))).toBe(true);
    expect(stages.some((s) => s.runs.some((r) => /npm ci .*--omit=dev/.test(r)))).toBe(true);
    // No RUN in the last stage: nothing there needs a shell, and its base has none.
    expect(runtime.runs).toEqual([]);
    expect(runtime.base).toMatch(/distroless/);
    expect(runtime.user).toMatch(/^[1-9]\d*(:\d+)?$/);
    // node_modules in the runtime come from the production-only stage.
    const nm = runtime.copies.find((c) => c.dest.endsWith("/node_modules"))!;
    expect(stageByName(nm.from!).runs.some((r) => /--omit=dev/.test(r))).toBe(true);
  });

  it("uses a current Node LTS (even major, newer than 20) in every Node stage", () => {
    const major = Number(args.NODE_VERSION!.split(".")[0]);
    expect(major).toBeGreaterThan(20);
    expect(major % 2).toBe(0);
    for (const s of stages.filter((x) => /^node:/.test(x.base))) expect(s.base).toMatch(new RegExp(`^node:${args.NODE_VERSION}-`));
  });

  it("runs `hookline operator` in exec form", () => {
    expect(runtime.entrypoint).toEqual(["/usr/local/bin/node", `${runtime.workdir}/bin/hookline.js`, "operator"]);
  });

  it("copies only paths that exist after `npm run build` and that .dockerignore lets in", () => {
    const ignore = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
    const fromContext = stages.flatMap((s) => s.copies.filter((c) => !c.from).flatMap((c) => c.sources));
    expect(fromContext.length).toBeGreaterThan(3);
    for (const src of fromContext) {
      expect(existsSync(join(ROOT, src)), src).toBe(true);
      const files = filesUnder(join(ROOT, src)).map((f) => relative(ROOT, f)).filter((f) => !f.endsWith(".test.ts"));
      for (const f of files) expect(dockerIgnored(ignore, f), `${f} must be in the build context`).toBe(false);
    }
    // What must stay out of the context.
    for (const f of ["node_modules/zod/package.json", "dist/cli/main.js", ".git/HEAD", "test/helpers/cluster.ts", "src/config/config.test.ts"]) expect(dockerIgnored(ignore, f), f).toBe(true);
    // Paths copied from the build stage exist in the repo after `npm run build` (WORKDIR /src = repo root).
    const build = stages[0]!;
    for (const c of runtime.copies.filter((x) => x.from === build.name)) {
      for (const src of c.sources) {
        if (src === "/usr/local/bin/node") continue; // the base image's Node: hack/node-lts.sh here
        expect(src.startsWith(`${build.workdir}/`), src).toBe(true);
        expect(existsSync(join(ROOT, src.slice(build.workdir.length + 1))), src).toBe(true);
      }
    }
  });
});

describe("the image layout runs", () => {
  let app: string;
  let deps: string;
  let node: string;
  let ns: string;

  beforeAll(async () => {
    ns = await createNamespace("image");
    node = testTools().imageNode;
    const tmp = await mkdtemp(join(tmpdir(), "hookline-image-"));
    app = join(tmp, "app");
    deps = join(tmp, "deps");
    // The prod-deps stage: package*.json, then npm ci --omit=dev.
    const prod = stages.find((s) => s.runs.some((r) => /--omit=dev/.test(r)))!;
    for (const c of prod.copies) for (const src of c.sources) cpSync(join(ROOT, src), join(deps, src), { recursive: true });
    const r = await exec("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: deps, timeoutMs: 180_000 });
    if (r.code !== 0) throw new Error(`npm ci --omit=dev failed: ${r.stderr}`);
    // The runtime stage's COPYs, with / mapped into the temp dir.
    for (const c of runtime.copies) {
      const dest = join(tmp, c.dest);
      for (const src of c.sources) {
        if (src === "/usr/local/bin/node") continue;
        const from = c.from ? (c.from === prod.name ? join(deps, src.slice(prod.workdir.length + 1)) : join(ROOT, src.slice(stageByName(c.from).workdir.length + 1))) : join(ROOT, src);
        cpSync(from, dest.endsWith("/") || c.sources.length > 1 || src.endsWith("/") ? join(dest, src.split("/").pop()!) : dest, { recursive: true });
      }
    }
  }, 300_000);

  afterAll(async () => {
    if (app) await rm(join(app, ".."), { recursive: true, force: true });
    if (ns) await deleteNamespace(ns);
  });

  it("has production dependencies only", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
    for (const d of Object.keys(pkg.dependencies)) expect(existsSync(join(app, "node_modules", d, "package.json")), d).toBe(true);
    // Dev tools stay out (@types/node is a runtime dependency of @kubernetes/client-node, so it may be there).
    for (const d of Object.keys(pkg.devDependencies).filter((x) => !x.startsWith("@types/"))) expect(existsSync(join(app, "node_modules", d)), d).toBe(false);
    expect(Object.keys(pkg.devDependencies)).toEqual(expect.arrayContaining(["typescript", "vitest", "eslint"]));
    expect(existsSync(join(app, "dist/cli/main.js"))).toBe(true);
    expect(existsSync(join(app, "src"))).toBe(false);
  });

  it("the ENTRYPOINT answers /healthz and /readyz, serves /metrics on the image's Node, and exits 0 on SIGTERM", async () => {
    const [metricsPort, healthPort] = await freePorts(2);
    const [, script, ...rest] = runtime.entrypoint!;
    // Only the image's ENV and what the chart's pod adds; no PATH, no shell.
    const env = {
      ...runtime.env,
      KUBECONFIG: inject("kubeconfig"),
      METRICS_PORT: String(metricsPort),
      HEALTH_PORT: String(healthPort),
      WATCH_NAMESPACES: ns,
      LEADER_ELECT: "false",
      POD_NAME: "image-test",
      POD_NAMESPACE: ns,
    };
    const child = spawn(node, [join(app, "..", script!), ...rest], { cwd: join(app, "..", runtime.workdir), env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (out += c));
    const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
    try {
      const get = async (port: number, path: string) => {
        const r = await fetch(`http://127.0.0.1:${port}${path}`);
        return { status: r.status, text: await r.text() };
      };
      await waitFor(async () => (await get(healthPort!, "/healthz")).status === 200, { description: `/healthz (output: ${out})`, timeoutMs: 30_000 });
      await waitFor(async () => (await get(healthPort!, "/readyz")).status === 200, { description: "/readyz", timeoutMs: 30_000 });
      const metrics = (await get(metricsPort!, "/metrics")).text;
      expect(metrics).toContain("webhook_deliveries_in_flight");
      const major = args.NODE_VERSION!.split(".")[0];
      expect(metrics).toMatch(new RegExp(`hookline_nodejs_version_info\\{[^}]*version="v${major}\\.`));
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(out).toContain('"msg":"webhook_deliveries_drained"');
  });
});
