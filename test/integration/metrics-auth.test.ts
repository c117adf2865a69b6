// METRICS_AUTH=kubernetes against the real API server: /metrics over HTTPS answers only a bearer
// token the API server authenticates (TokenReview, its own audiences) of a user it allows `get`
// on the non-resource URL /metrics (SubjectAccessReview), as the chart installs it; plain HTTP
// gets nothing from the port.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectlOk } from "../helpers/cluster.js";
import { apply, serviceAccountToken } from "../helpers/kube.js";
import { startOperator, type TestOperator } from "../helpers/operator.js";
import { TestCa } from "../helpers/pki.js";
import { Prometheus } from "../helpers/prometheus.js";
import { waitFor } from "../helpers/cluster.js";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe("METRICS_AUTH=kubernetes: /metrics over HTTPS, for the users the API server allows", () => {
  let ns: string;
  let ca: TestCa;
  let dir: string;
  let op: TestOperator;
  let role: string;
  let readerToken: string;
  let strangerToken: string;

  const get = (token?: string): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: op.op.metricsPort, path: "/metrics", ca: ca.cert, headers: token ? { authorization: `Bearer ${token}` } : {} },
        (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (c: string) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
        },
      );
      req.on("error", reject);
      req.end();
    });

  beforeAll(async () => {
    ns = await createNamespace("metrics-auth", { waitForServiceAccount: true });
    role = `${ns}-metrics-reader`;
    await apply([
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "prometheus", namespace: ns } },
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "stranger", namespace: ns } },
      // What the chart's <release>-metrics-reader ClusterRole grants.
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: role }, rules: [{ nonResourceURLs: ["/metrics"], verbs: ["get"] }] },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: role },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
        subjects: [{ kind: "ServiceAccount", name: "prometheus", namespace: ns }],
      },
    ]);
    // Tokens for the API server's own audience: what Prometheus sends from its ServiceAccount.
    readerToken = await serviceAccountToken(ns, "prometheus", { audience: null });
    strangerToken = await serviceAccountToken(ns, "stranger", { audience: null });
    ca = await TestCa.create();
    const pem = await ca.issue("hookline-metrics", "server");
    dir = await mkdtemp(join(tmpdir(), "hookline-metrics-tls-"));
    await writeFile(join(dir, "tls.crt"), pem.cert);
    await writeFile(join(dir, "tls.key"), pem.key);
    op = await startOperator({ namespaces: [ns], env: { METRICS_AUTH: "kubernetes", METRICS_TLS_CERT_FILE: join(dir, "tls.crt"), METRICS_TLS_KEY_FILE: join(dir, "tls.key") } });
  });
  afterAll(async () => {
    await op?.stop();
    await ca?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
    if (role) await kubectlOk(["delete", "clusterrolebinding,clusterrole", role, "--ignore-not-found"]);
    if (ns) await deleteNamespace(ns);
  });

  it("without a token, or with one the API server does not know: 401 with a Bearer challenge, no metrics", async () => {
    for (const token of [undefined, "not-a-token", `${readerToken}x`]) {
      const r = await get(token);
      expect(r.status, String(token).slice(0, 20)).toBe(401);
      expect(r.headers["www-authenticate"]).toMatch(/^Bearer /);
      expect(r.body).not.toContain("webhook_");
      expect(r.body).not.toContain(readerToken);
    }
  });

  it("a valid token of a user without get on /metrics: 403 naming the user, no metrics", async () => {
    const r = await get(strangerToken);
    expect(r.status).toBe(403);
    expect(r.body).toContain(`system:serviceaccount:${ns}:stranger may not get /metrics`);
    expect(r.body).not.toContain("webhook_");
  });

  it("the token of a user the ClusterRole allows: 200 and the metrics, over HTTPS with the configured certificate", async () => {
    const r = await get(readerToken);
    expect(r.status).toBe(200);
    expect(r.body).toContain("# TYPE webhook_delivery_attempts_total counter");
    // Again within the answers' lifetime: no new review needed, the same answer.
    expect((await get(readerToken)).status).toBe(200);
  });

  it("plain HTTP on the port gets no metrics", async () => {
    const plain = await new Promise<Answer | Error>((resolve) => {
      const req = httpRequest({ host: "127.0.0.1", port: op.op.metricsPort, path: "/metrics", headers: { authorization: `Bearer ${readerToken}` } }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on("error", (err) => resolve(err));
      req.end();
    });
    if (!(plain instanceof Error)) expect(plain.body).not.toContain("webhook_");
  });

  it("a real Prometheus scrapes it with the reader's token over HTTPS (target up, series stored); with the stranger's token its target is down with 403", async () => {
    for (const [token, up] of [[readerToken, true], [strangerToken, false]] as const) {
      const prom = await Prometheus.start({ targets: [`127.0.0.1:${op.op.metricsPort}`], https: { ca: ca.cert, token } });
      try {
        const target = await waitFor(async () => (await prom.targets()).find((t) => t.health !== "unknown"), { description: "the first scrape", timeoutMs: 30_000 });
        if (up) {
          expect(target.health, target.lastError).toBe("up");
          await waitFor(async () => (await prom.query("hookline_build_info")).length === 1, { description: "hookline_build_info stored", timeoutMs: 30_000 });
        } else {
          expect(target.health).toBe("down");
          expect(target.lastError).toContain("403");
        }
      } finally {
        await prom.stop();
      }
    }
  });
});
