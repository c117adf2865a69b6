// The receiver snippets of docs/receivers.md, run as they are (TypeScript with tsx, Python in a
// venv with standardwebhooks from PyPI, Go built with the module from the Go proxy), receiving
// real Hookline deliveries: verification, rotation (two signatures), dedupe by webhook-id, a
// forged request refused; the HMACSHA256Hex helpers (timestamp and body signed, tolerance,
// constant-time compare, 403, and 401 when unsigned); and a secret the Standard Webhooks libraries cannot use refused.
import { spawn, type ChildProcess } from "node:child_process";
import { createHmac } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, waitFor } from "../helpers/cluster.js";
import { exec } from "../helpers/exec.js";
import { apply, delivery, getObj, secret, subscription } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { Receiver } from "../helpers/receiver.js";

const DOCS = fileURLToPath(new URL("../../docs/receivers/", import.meta.url));
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const VENV = join(homedir(), ".cache/hookline/receivers-venv");
const NEW = `whsec_${Buffer.from("the new receiver secret, 32 bytes").toString("base64")}`;
const OLD = `whsec_${Buffer.from("the old receiver secret, 32 bytes").toString("base64")}`;

interface Snippet {
  port: number;
  lines: Array<Record<string, unknown>>;
  child: ChildProcess;
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function run(command: string, args: string[], secretValue: string): Promise<Snippet> {
  const port = await freePort();
  const child = spawn(command, args, { env: { ...process.env, WEBHOOK_SECRET: secretValue, PORT: String(port) }, stdio: ["ignore", "pipe", "pipe"] });
  const snippet: Snippet = { port, lines: [], child };
  let buf = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    buf += c;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      snippet.lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      buf = buf.slice(i + 1);
    }
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c));
  await waitFor(() => snippet.lines.some((l) => l.listening) || child.exitCode !== null, { description: `${command} listening`, timeoutMs: 60_000 });
  if (child.exitCode !== null) throw new Error(`${command} ${args.join(" ")} exited ${child.exitCode}: ${err}`);
  return snippet;
}

/** The venv with standardwebhooks from PyPI, created once in ~/.cache/hookline. */
async function python(): Promise<string> {
  const bin = join(VENV, "bin/python");
  if ((await exec(bin, ["-c", "import standardwebhooks"]).catch(() => ({ code: 1 }))).code === 0) return bin;
  expect((await exec("python3", ["-m", "venv", VENV])).code).toBe(0);
  const pip = await exec(join(VENV, "bin/pip"), ["install", "-q", "-r", join(DOCS, "python/requirements.txt")], { timeoutMs: 300_000 });
  expect(pip.code, pip.stderr).toBe(0);
  return bin;
}

/** Where the Go receivers were built (removed after the file). */
const goDirs: string[] = [];
async function goBinary(pkg = "."): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "receiver-go-"));
  goDirs.push(dir);
  const out = join(dir, "receiver");
  const r = await exec("go", ["build", "-o", out, pkg], { cwd: join(DOCS, "go"), timeoutMs: 300_000 });
  expect(r.code, r.stderr).toBe(0);
  return out;
}

const succeeded = async (ns: string, name: string) => (await getObj("whdel", ns, name))?.status?.phase === "Succeeded";

describe("docs/receivers.md shows the files CI runs", () => {
  it("each code block after a link to receivers/<file> is that file, byte for byte", () => {
    const md = readFileSync(join(DOCS, "../receivers.md"), "utf8");
    // Each ts/python/go block, with the last receivers/<file> link in the prose before it.
    const shown: Array<readonly [string, string]> = [];
    let prose = 0;
    for (const m of md.matchAll(/^```(ts|python|go)\n([\s\S]*?)^```$/gm)) {
      const links = [...md.slice(prose, m.index).matchAll(/\[receivers\/([^\]]+)\]\(receivers\/\1\)/g)];
      if (links.length) shown.push([links.at(-1)![1]!, m[2]!]);
      prose = m.index + m[0].length;
    }
    expect(shown.map(([f]) => f).sort()).toEqual(["go/hmachex/main.go", "go/main.go", "python/hmac_hex.py", "python/receiver.py", "typescript/hmac-hex.ts", "typescript/receiver.ts"]);
    for (const [file, text] of shown) expect(text, file).toBe(readFileSync(join(DOCS, file), "utf8"));
  });
});

describe("docs/receivers: the snippets receive real deliveries", () => {
  let ns: string;
  let op: TestOperator;
  const snippets: Snippet[] = [];
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    ns = await createNamespace("receivers");
    // A Secret fixed by the user is read again within a second (the default is 30 s).
    op = await startOperator({ namespaces: [ns], env: { WEBHOOK_SECRET_REFRESH_MS: "1000" } });
    // Rotation: NEW is current, OLD previous; requests carry both signatures.
    await apply(secret(ns, "rotating", { secret: NEW, previous: OLD }));
  });
  afterAll(async () => {
    for (const s of snippets) s.child.kill();
    await Promise.all(receivers.map((r) => r.close()));
    await op?.stop();
    await deleteNamespace(ns);
    for (const d of goDirs) rmSync(d, { recursive: true, force: true });
  });

  const cases: Array<[string, () => Promise<[string, string[]]>, string]> = [
    ["typescript", () => Promise.resolve([process.execPath, [join(ROOT, "node_modules/tsx/dist/cli.mjs"), join(DOCS, "typescript/receiver.ts")]]), NEW],
    ["python", async () => [await python(), [join(DOCS, "python/receiver.py")]], OLD],
    ["go", async () => [await goBinary(), []], NEW],
  ];

  it.each(cases)("%s: verifies (either rotating secret), dedupes by webhook-id, refuses a forged request", async (lang, command, key) => {
    const [cmd, args] = await command();
    const s = await run(cmd, args, key);
    snippets.push(s);
    const url = `http://127.0.0.1:${s.port}/hooks`;
    await apply([subscription(ns, lang, { url, secretRef: { name: "rotating", previousKey: "previous" } }), delivery(ns, `${lang}-1`, lang, { eventId: `evt-${lang}`, payload: { order: 7, lang } })]);
    await waitFor(() => succeeded(ns, `${lang}-1`), { description: `${lang}-1 delivered`, timeoutMs: 60_000 });
    expect(s.lines).toContainEqual({ received: `evt-${lang}`, type: "order.paid", data: { order: 7, lang } });

    // The same event again (a producer retry under another name): same webhook-id, acknowledged, not processed twice.
    await apply(delivery(ns, `${lang}-2`, lang, { eventId: `evt-${lang}`, payload: { order: 7, lang } }));
    await waitFor(() => succeeded(ns, `${lang}-2`), { description: `${lang}-2 delivered`, timeoutMs: 60_000 });
    expect(s.lines.filter((l) => l.received === `evt-${lang}`)).toHaveLength(1);
    expect(s.lines).toContainEqual({ duplicate: `evt-${lang}` });

    const forged = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "webhook-id": "evt-forged", "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" },
      body: JSON.stringify({ id: "evt-forged", type: "order.paid", timestamp: new Date().toISOString(), data: {} }),
    });
    // As the specification's receiver: 403 for a signature that does not verify, 401 for none.
    expect(forged.status).toBe(403);
    const unsigned = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "webhook-id": "evt-unsigned", "webhook-timestamp": String(Math.floor(Date.now() / 1000)) },
      body: JSON.stringify({ id: "evt-unsigned", type: "order.paid", timestamp: new Date().toISOString(), data: {} }),
    });
    expect(unsigned.status).toBe(401);
    expect(s.lines.some((l) => l.received === "evt-forged" || l.received === "evt-unsigned")).toBe(false);
  });

  const hexCases: Array<[string, () => Promise<[string, string[]]>]> = [
    ["typescript", () => Promise.resolve([process.execPath, [join(ROOT, "node_modules/tsx/dist/cli.mjs"), join(DOCS, "typescript/hmac-hex.ts")]])],
    ["python", async () => [await python(), [join(DOCS, "python/hmac_hex.py")]]],
    ["go", async () => [await goBinary("./hmachex"), []]],
  ];

  it.each(hexCases)(
    "HMACSHA256Hex, %s: the helper verifies timestamp and body (a plain secret as its UTF-8 bytes), dedupes, answers 403 to a forged, a stale and a LegacyBodyOnly request and 401 to an unsigned one",
    async (lang, command) => {
      const plain = `a plain secret for hex HMAC (${lang})`;
      const name = `hex-${lang}`;
      await apply(secret(ns, name, { secret: plain }));
      const [cmd, args] = await command();
      const s = await run(cmd, args, plain);
      snippets.push(s);
      const url = `http://127.0.0.1:${s.port}/`;
      await apply([subscription(ns, name, { url, secretRef: { name }, signature: { scheme: "HMACSHA256Hex" } }), delivery(ns, `${name}-1`, name, { eventId: `evt-${name}` })]);
      await waitFor(() => succeeded(ns, `${name}-1`), { description: `${name}-1 delivered`, timeoutMs: 60_000 });
      await waitFor(() => s.lines.some((l) => l.received === `evt-${name}`), { description: `${lang} logs evt-${name}` });
      expect(s.lines).toContainEqual({ received: `evt-${name}`, type: "order.paid", data: { order: `${name}-1` } });
      // The default form, as stored by the API server.
      expect((await getObj("whsub", ns, name))!.spec.signature).toEqual({ scheme: "HMACSHA256Hex", signedContent: "TimestampAndBody" });

      // The same event again: acknowledged, not processed twice.
      await apply(delivery(ns, `${name}-2`, name, { eventId: `evt-${name}` }));
      await waitFor(() => succeeded(ns, `${name}-2`), { description: `${name}-2 delivered`, timeoutMs: 60_000 });
      await waitFor(() => s.lines.some((l) => l.duplicate === `evt-${name}`), { description: `${lang} logs the duplicate` });
      expect(s.lines.filter((l) => l.received === `evt-${name}`)).toHaveLength(1);

      const post = (timestamp: number, sign: (ts: string, body: string) => string) => {
        const body = JSON.stringify({ id: "evt-forged", type: "order.paid", timestamp: new Date().toISOString(), data: {} });
        return fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-webhook-id": "evt-forged", "x-webhook-timestamp": String(timestamp), "x-webhook-signature": sign(String(timestamp), body) }, body });
      };
      const now = Math.floor(Date.now() / 1000);
      const hex = (text: string) => `sha256=${createHmac("sha256", plain).update(text).digest("hex")}`;
      // A request signed right, with the helper's own rules, is taken: the checks below fail for their own reason.
      expect((await post(now, (ts, body) => hex(`${ts}.${body}`))).status).toBe(204);
      // (Each snippet logs after it answers: wait for the line.)
      await waitFor(() => s.lines.some((l) => l.received === "evt-forged"), { description: `${lang} logs the well-signed request` });
      const refused = s.lines.filter((l) => l.rejected).length;
      // Forged (wrong key), stale (signed right, 10 minutes old), body only (the legacy form), no timestamp.
      // As the specification's receiver: 403 for a signature that does not verify, 401 for none.
      expect((await post(now, (ts, body) => `sha256=${createHmac("sha256", "another secret").update(`${ts}.${body}`).digest("hex")}`)).status).toBe(403);
      expect((await post(now - 600, (ts, body) => hex(`${ts}.${body}`))).status).toBe(403);
      expect((await post(now, (_ts, body) => hex(body))).status).toBe(403);
      expect((await post(Number.NaN, (ts, body) => hex(`${ts}.${body}`))).status).toBe(403);
      const unsigned = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-webhook-id": "evt-unsigned", "x-webhook-timestamp": String(now) }, body: "{}" });
      expect(unsigned.status).toBe(401);
      await waitFor(() => s.lines.filter((l) => l.rejected).length === refused + 5, { description: `${lang} logs five refusals` });

      // A subscription on the legacy form reaches this receiver with a body-only signature: 403,
      // which Hookline dead-letters at once (PermanentFailure).
      await apply([subscription(ns, `${name}-legacy`, { url, secretRef: { name }, signature: { scheme: "HMACSHA256Hex", signedContent: "LegacyBodyOnly" } }), delivery(ns, `${name}-legacy-1`, `${name}-legacy`)]);
      const dead = await waitFor(async () => ((await getObj("whdel", ns, `${name}-legacy-1`))?.status?.phase === "DeadLettered" ? (await getObj("whdel", ns, `${name}-legacy-1`))!.status : undefined), {
        description: `${name}-legacy-1 dead-lettered`,
        timeoutMs: 60_000,
      });
      expect(dead.deadLetter.reason).toBe("PermanentFailure");
      expect(dead.lastAttempt.responseStatus).toBe(403);
    },
  );

  it("HMACSHA256Hex LegacyBodyOnly: a real delivery carries sha256=<hex HMAC of the body alone>; the default signs the timestamp too", async () => {
    const plain = "a plain secret for the legacy form";
    await apply(secret(ns, "legacy-hex", { secret: plain }));
    const r = await Receiver.start(() => 204);
    receivers.push(r);
    await apply([
      subscription(ns, "legacy-hex", { url: r.url(), secretRef: { name: "legacy-hex" }, signature: { scheme: "HMACSHA256Hex", signedContent: "LegacyBodyOnly" } }),
      subscription(ns, "stamped-hex", { url: r.url(), secretRef: { name: "legacy-hex" }, signature: { scheme: "HMACSHA256Hex" } }),
      delivery(ns, "legacy-hex-1", "legacy-hex", { eventId: "evt-legacy-hex" }),
      delivery(ns, "stamped-hex-1", "stamped-hex", { eventId: "evt-stamped-hex" }),
    ]);
    await waitFor(async () => (await succeeded(ns, "legacy-hex-1")) && (await succeeded(ns, "stamped-hex-1")), { description: "both delivered", timeoutMs: 60_000 });
    const byId = (id: string) => r.requests.find((q) => q.headers["x-webhook-id"] === id)!;
    const legacy = byId("evt-legacy-hex");
    expect(legacy.headers["x-webhook-signature"]).toBe(`sha256=${createHmac("sha256", plain).update(legacy.bytes).digest("hex")}`);
    const stamped = byId("evt-stamped-hex");
    expect(stamped.headers["x-webhook-signature"]).toBe(`sha256=${createHmac("sha256", plain).update(`${String(stamped.headers["x-webhook-timestamp"])}.`).update(stamped.bytes).digest("hex")}`);
  });

  it("a StandardWebhooks secret without whsec_ is refused on the subscription (nothing sent) until it is whsec_<base64> of the same bytes", async () => {
    const plain = "legacy-plain-secret";
    await apply(secret(ns, "legacy", { secret: plain }));
    const s = await run(process.execPath, [join(ROOT, "node_modules/tsx/dist/cli.mjs"), join(DOCS, "typescript/receiver.ts")], `whsec_${Buffer.from(plain).toString("base64")}`);
    snippets.push(s);
    await apply([subscription(ns, "legacy", { url: `http://127.0.0.1:${s.port}/`, secretRef: { name: "legacy" } }), delivery(ns, "legacy-1", "legacy", { eventId: "evt-legacy" })]);
    const ready = await waitFor(async () => (await getObj("whsub", ns, "legacy"))?.status?.conditions?.find((c: { type: string; status: string }) => c.type === "Ready" && c.status === "False"), { description: "Ready=False on legacy" });
    expect(ready.reason).toBe("SecretNotVerifiable");
    expect(ready.message).toContain('Secret legacy key "secret"');
    expect(ready.message).toContain("whsec_");
    expect(ready.message).not.toContain(plain);
    expect(s.lines.filter((l) => !l.listening)).toEqual([]);

    // The fix keeps the key bytes: receivers that used the raw value verify as before.
    await apply(secret(ns, "legacy", { secret: `whsec_${Buffer.from(plain).toString("base64")}` }));
    await waitFor(() => succeeded(ns, "legacy-1"), { description: "legacy-1 delivered after the fix", timeoutMs: 90_000 });
    expect(s.lines).toContainEqual({ received: "evt-legacy", type: "order.paid", data: { order: "legacy-1" } });
  });
});
