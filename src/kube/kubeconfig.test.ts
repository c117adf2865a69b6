import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import fc from "fast-check";
import { stringify } from "yaml";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ContextNotFoundError, loadKubeconfig, type ClusterCredentials, type HttpsOptions } from "./kubeconfig.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kubeconfig-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** No KUBECONFIG, a HOME without ~/.kube/config and no service account: only what a test gives. */
const bare = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ HOME: join(dir, "home"), ...extra });
const noPod = () => join(dir, "no-service-account");

function write(name: string, doc: unknown): string {
  const file = join(dir, name);
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, typeof doc === "string" ? doc : stringify(doc));
  return file;
}

async function applied(c: ClusterCredentials): Promise<Record<string, unknown>> {
  const opts: HttpsOptions = {};
  await c.applyToHTTPSOptions(opts);
  const { ca, cert, key, rejectUnauthorized, servername, headers } = opts;
  const b = (v: Buffer | string | undefined) => (v === undefined ? undefined : Buffer.from(v).toString("base64"));
  const cl = c.getCurrentCluster();
  return { ca: b(ca), cert: b(cert), key: b(key), rejectUnauthorized, servername, headers: headers?.Authorization ? { Authorization: headers.Authorization } : undefined, cluster: cl && { server: cl.server, skipTLSVerify: cl.skipTLSVerify ?? false, tlsServerName: cl.tlsServerName } };
}

const config = (o: { clusters: unknown[]; users: unknown[]; contexts: unknown[]; current?: string }) => ({
  apiVersion: "v1",
  kind: "Config",
  clusters: o.clusters,
  users: o.users,
  contexts: o.contexts,
  ...(o.current ? { "current-context": o.current } : {}),
});

describe("loadKubeconfig reads what client-node's KubeConfig reads", () => {
  it("the same TLS material, Authorization header and cluster for generated kubeconfigs (relative files included)", async () => {
    const b64 = fc.uint8Array({ minLength: 1, maxLength: 40 }).map((a) => Buffer.from(a).toString("base64"));
    const material = fc.oneof(fc.record({ data: b64 }), fc.record({ file: fc.constantFrom("a.pem", "sub/b.pem", "ü/ç.pem"), bytes: b64 }));
    const cluster = fc.record({
      server: fc.constantFrom("https://127.0.0.1:6443", "https://api.example:443/", "https://[::1]:6443"),
      ca: fc.option(material, { nil: undefined }),
      skip: fc.boolean(),
      tlsServerName: fc.option(fc.constantFrom("kubernetes", "api.internal"), { nil: undefined }),
    });
    const user = fc.record({
      token: fc.option(fc.stringMatching(/^[A-Za-z0-9._-]{1,60}$/), { nil: undefined }),
      cert: fc.option(material, { nil: undefined }),
      key: fc.option(material, { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(cluster, user, fc.option(fc.constantFrom("ns-a", "ñ"), { nil: undefined })), { minLength: 1, maxLength: 3 }), fc.nat(), async (entries, pick) => {
        rmSync(dir, { recursive: true, force: true });
        mkdirSync(dir, { recursive: true });
        const put = (m: { data: string } | { file: string; bytes: string } | undefined, dataKey: string, fileKey: string, n: number) => {
          if (!m) return {};
          if ("data" in m) return { [dataKey]: m.data };
          const rel = `${n}-${m.file}`;
          mkdirSync(join(dir, "cfg", rel, ".."), { recursive: true });
          writeFileSync(join(dir, "cfg", rel), Buffer.from(m.bytes, "base64"));
          return { [fileKey]: rel };
        };
        const doc = config({
          clusters: entries.map(([c], i) => ({ name: `c${i}`, cluster: { server: c.server, "insecure-skip-tls-verify": c.skip, ...(c.tlsServerName ? { "tls-server-name": c.tlsServerName } : {}), ...put(c.ca, "certificate-authority-data", "certificate-authority", i) } })),
          users: entries.map(([, u], i) => ({ name: `u${i}`, user: { ...(u.token ? { token: u.token } : {}), ...put(u.cert, "client-certificate-data", "client-certificate", 10 + i), ...put(u.key, "client-key-data", "client-key", 20 + i) } })),
          contexts: entries.map(([, , ns], i) => ({ name: `x${i}`, context: { cluster: `c${i}`, user: `u${i}`, ...(ns ? { namespace: ns } : {}) } })),
          current: `x${pick % entries.length}`,
        });
        const file = write(join("cfg", "config"), doc);
        const ours = await loadKubeconfig({ file, env: bare(), serviceAccountDir: noPod() });
        const lib = new KubeConfig();
        lib.loadFromFile(file);
        expect(await applied(ours.credentials)).toEqual(await applied(lib));
        expect(ours.context).toBe(lib.getCurrentContext());
        expect(ours.namespace).toBe(lib.getContextObject(lib.getCurrentContext())?.namespace);
      }),
      { numRuns: 60 },
    );
  });

  it("merges KUBECONFIG's files: the first file's current-context, names from every file", async () => {
    const a = write("a.yaml", config({ clusters: [{ name: "ca", cluster: { server: "https://a:1" } }], users: [{ name: "ua", user: { token: "ta" } }], contexts: [{ name: "xa", context: { cluster: "ca", user: "ua" } }], current: "xb" }));
    const b = write("b.yaml", config({ clusters: [{ name: "cb", cluster: { server: "https://b:2" } }], users: [{ name: "ub", user: { token: "tb" } }], contexts: [{ name: "xb", context: { cluster: "cb", user: "ub", namespace: "nb" } }], current: "xa" }));
    const env = bare({ KUBECONFIG: `${a}${delimiter}${b}` });
    const ours = await loadKubeconfig({ env, serviceAccountDir: noPod() });
    expect(ours).toMatchObject({ context: "xb", namespace: "nb" });
    expect(await applied(ours.credentials)).toMatchObject({ headers: { Authorization: "Bearer tb" }, cluster: { server: "https://b:2" } });
    expect((await loadKubeconfig({ env, context: "xa", serviceAccountDir: noPod() })).context).toBe("xa");
    // As kubectl: the first of a name wins, and a listed file that does not exist is skipped.
    const dup = write("dup.yaml", config({ clusters: [{ name: "cb", cluster: { server: "https://c:3" } }], users: [{ name: "ub", user: { token: "tc" } }], contexts: [], current: "xa" }));
    const first = await loadKubeconfig({ env: bare({ KUBECONFIG: [join(dir, "gone.yaml"), a, dup, b].join(delimiter) }), serviceAccountDir: noPod() });
    expect(first.context).toBe("xb");
    expect(await applied(first.credentials)).toMatchObject({ headers: { Authorization: "Bearer tc" }, cluster: { server: "https://c:3" } });
    await expect(loadKubeconfig({ env: bare({ KUBECONFIG: [join(dir, "gone.yaml"), join(dir, "gone-too.yaml")].join(delimiter) }), serviceAccountDir: noPod() })).rejects.toThrow(/no kubeconfig: none of KUBECONFIG's files exists \(.*gone\.yaml.*gone-too\.yaml\)/);
  });

  it("picks the server and credentials kubectl picks from KUBECONFIG's files (names repeated across files, files missing)", async () => {
    // kubectl as found on this process's PATH, then run with nothing of this process's environment.
    const kubectl = spawnSync("sh", ["-c", "command -v kubectl"], { encoding: "utf8" }).stdout.trim();
    expect(kubectl, "kubectl on PATH").not.toBe("");
    const kubectlView = (kubeconfig: string): { server?: string; token?: string } | undefined => {
      const r = spawnSync(kubectl, ["config", "view", "--minify", "--raw", "-o", "json"], { env: { HOME: join(dir, "home"), KUBECONFIG: kubeconfig }, encoding: "utf8" });
      if (r.status !== 0) return undefined;
      const v = JSON.parse(r.stdout) as { clusters?: Array<{ cluster: { server: string } }>; users?: Array<{ user: { token?: string } }> };
      return { server: v.clusters?.[0]?.cluster.server, token: v.users?.[0]?.user.token };
    };
    const name = fc.constantFrom("default", "a", "b");
    const file = fc.record({
      missing: fc.boolean(),
      current: fc.option(name, { nil: undefined }),
      entries: fc.array(fc.tuple(name, fc.nat(99)), { minLength: 1, maxLength: 3 }),
    });
    let n = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(file, { minLength: 1, maxLength: 4 }), async (files) => {
        const paths = files.map((f) => {
          const path = join(dir, `merge-${n++}.yaml`);
          // Each file whole: a context names the cluster and user of its own name in the same file.
          if (!f.missing) write(path.slice(dir.length + 1), config({
            clusters: f.entries.map(([e, v]) => ({ name: e, cluster: { server: `https://${e}-${v}.example:6443` } })),
            users: f.entries.map(([e, v]) => ({ name: e, user: { token: `${e}-${v}` } })),
            contexts: f.entries.map(([e]) => ({ name: e, context: { cluster: e, user: e } })),
            ...(f.current ? { current: f.current } : {}),
          }));
          return path;
        });
        const want = kubectlView(paths.join(delimiter));
        const got = await loadKubeconfig({ env: bare({ KUBECONFIG: paths.join(delimiter) }), serviceAccountDir: noPod() }).then(
          async (k) => applied(k.credentials),
          () => undefined,
        );
        if (!want) expect(got, "kubectl found no current context, nor should we").toBeUndefined();
        else expect({ server: (got?.cluster as { server?: string } | undefined)?.server, token: (got?.headers as { Authorization?: string } | undefined)?.Authorization?.replace(/^Bearer /, "") }).toEqual(want);
      }),
      { numRuns: 30 },
    );
  }, 120_000);

  it("falls back to ~/.kube/config, then to the pod's service account", async () => {
    write(join("home", ".kube", "config"), config({ clusters: [{ name: "h", cluster: { server: "https://home:1" } }], users: [], contexts: [{ name: "h", context: { cluster: "h" } }], current: "h" }));
    expect(await applied((await loadKubeconfig({ env: bare(), serviceAccountDir: noPod() })).credentials)).toMatchObject({ cluster: { server: "https://home:1" }, headers: undefined });
    rmSync(join(dir, "home"), { recursive: true });
    await expect(loadKubeconfig({ env: bare(), serviceAccountDir: noPod() })).rejects.toThrow(/no kubeconfig: KUBECONFIG is not set, ~\/\.kube\/config does not exist and this is not a pod/);
  });
});

describe("in-cluster credentials", () => {
  it("the service account's CA, namespace and token, the token read again when the kubelet rotates it", async () => {
    const sa = join(dir, "sa");
    write(join("sa", "token"), "first-token");
    writeFileSync(join(sa, "ca.crt"), "CA");
    writeFileSync(join(sa, "namespace"), "hookline-system\n");
    const { credentials, namespace, context } = await loadKubeconfig({ env: bare({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" }), serviceAccountDir: sa });
    expect({ namespace, context }).toEqual({ namespace: "hookline-system", context: "inClusterContext" });
    expect(await applied(credentials)).toMatchObject({ ca: Buffer.from("CA").toString("base64"), headers: { Authorization: "Bearer first-token" }, cluster: { server: "https://[fd00::1]:443" } });
    writeFileSync(join(sa, "token"), "rotated-token");
    expect(await applied(credentials)).toMatchObject({ headers: { Authorization: "Bearer rotated-token" } });
  });

  it("names what is missing", async () => {
    const sa = join(dir, "sa");
    write(join("sa", "token"), "t");
    await expect(loadKubeconfig({ env: bare(), serviceAccountDir: sa })).rejects.toThrow(/KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT/);
  });
});

describe("a kubeconfig user's token file", () => {
  it("is read on every refresh (client-node reads it once), trimmed, relative to the kubeconfig", async () => {
    write(join("cfg", "token"), "one\n");
    const file = write(join("cfg", "config"), config({ clusters: [{ name: "c", cluster: { server: "https://c:1" } }], users: [{ name: "u", user: { tokenFile: "token" } }], contexts: [{ name: "x", context: { cluster: "c", user: "u" } }], current: "x" }));
    const { credentials } = await loadKubeconfig({ file, env: bare(), serviceAccountDir: noPod() });
    expect(await applied(credentials)).toMatchObject({ headers: { Authorization: "Bearer one" } });
    writeFileSync(join(dir, "cfg", "token"), "two");
    expect(await applied(credentials)).toMatchObject({ headers: { Authorization: "Bearer two" } });
    rmSync(join(dir, "cfg", "token"));
    await expect(credentials.applyToHTTPSOptions({})).rejects.toThrow(/cannot read the token file .*token of kubeconfig user "u"/);
  });

  it("basic auth becomes an Authorization header", async () => {
    const file = write("config", config({ clusters: [{ name: "c", cluster: { server: "https://c:1" } }], users: [{ name: "u", user: { username: "ada", password: "pä:ss" } }], contexts: [{ name: "x", context: { cluster: "c", user: "u" } }], current: "x" }));
    expect(await applied((await loadKubeconfig({ file, env: bare(), serviceAccountDir: noPod() })).credentials)).toMatchObject({ headers: { Authorization: `Basic ${Buffer.from("ada:pä:ss").toString("base64")}` } });
  });
});

describe("an exec plugin", () => {
  it("is run by client-node's KubeConfig, imported for it", async () => {
    const plugin = write("plugin.mjs", `process.stdout.write(JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: "from-exec-" + process.env.WHO } }));\n`);
    chmodSync(plugin, 0o755);
    const file = write("config", config({
      clusters: [{ name: "c", cluster: { server: "https://c:1" } }],
      users: [{ name: "u", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: process.execPath, args: [plugin], env: [{ name: "WHO", value: "plugin" }], interactiveMode: "Never" } } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u", namespace: "n" } }],
      current: "x",
    }));
    const loaded = await loadKubeconfig({ file, env: bare(), serviceAccountDir: noPod() });
    expect(loaded.credentials).toBeInstanceOf(KubeConfig);
    expect(loaded.namespace).toBe("n");
    expect(await applied(loaded.credentials)).toMatchObject({ headers: { Authorization: "Bearer from-exec-plugin" }, cluster: { server: "https://c:1" } });

    // Through KUBECONFIG, merged as kubectl merges: a missing file skipped, the first of a name wins.
    const later = write("later.yaml", config({ clusters: [{ name: "c", cluster: { server: "https://later:2" } }], users: [{ name: "u", user: { token: "later" } }], contexts: [{ name: "x", context: { cluster: "c" } }], current: "x" }));
    const merged = await loadKubeconfig({ env: bare({ KUBECONFIG: [join(dir, "gone.yaml"), file, later].join(delimiter) }), serviceAccountDir: noPod() });
    expect(merged.credentials).toBeInstanceOf(KubeConfig);
    expect(await applied(merged.credentials)).toMatchObject({ headers: { Authorization: "Bearer from-exec-plugin" }, cluster: { server: "https://c:1" } });
  });
});

describe("errors name the file or the field", () => {
  const base = { clusters: [{ name: "c", cluster: { server: "https://c:1" } }], users: [{ name: "u", user: { token: "t" } }], contexts: [{ name: "x", context: { cluster: "c", user: "u" } }] };
  const load = (doc: unknown, context?: string) => loadKubeconfig({ file: write("config", doc), env: bare(), serviceAccountDir: noPod(), ...(context ? { context } : {}) });

  it.each([
    ["not YAML", "clusters: [\n", /kubeconfig .*config: not YAML/],
    ["a list", "- 1\n", /not a mapping/],
    ["no current-context", config(base), /no current-context/],
    ["a current-context it does not define", config({ ...base, current: "gone" }), /current-context "gone" does not exist/],
    ["a cluster without server", config({ ...base, clusters: [{ name: "c", cluster: {} }], current: "x" }), /clusters\[0\]\.cluster\.server is missing/],
    ["a context naming no cluster it defines", config({ ...base, contexts: [{ name: "x", context: { cluster: "other" } }], current: "x" }), /context "x" names cluster "other"/],
    ["a context naming no user it defines", config({ ...base, contexts: [{ name: "x", context: { cluster: "c", user: "nobody" } }], current: "x" }), /context "x" names user "nobody"/],
    ["users not a list", { ...config({ ...base, current: "x" }), users: { u: 1 } }, /users must be a list/],
    ["a name defined twice in one file (kubectl refuses the file)", config({ ...base, users: [...base.users, { name: "u", user: { token: "other" } }], current: "x" }), /users\[1\]\.name "u" is defined twice in this file/],
  ])("%s", async (_what, doc, message) => {
    await expect(load(doc)).rejects.toThrow(message);
  });

  it("--context naming no context is a ContextNotFoundError from the flag", async () => {
    const err = await load(config({ ...base, current: "x" }), "nope").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ContextNotFoundError);
    expect(err).toMatchObject({ fromFlag: true, message: '--context: context "nope" does not exist in the kubeconfig' });
  });

  it("a CA file that cannot be read, when the connection is made", async () => {
    const { credentials } = await load(config({ ...base, clusters: [{ name: "c", cluster: { server: "https://c:1", "certificate-authority": "missing-ca.pem" } }], current: "x" }));
    await expect(credentials.applyToHTTPSOptions({})).rejects.toThrow(/cannot read the kubeconfig's certificate-authority .*missing-ca\.pem/);
  });
});
