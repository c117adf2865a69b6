// Reading a kubeconfig as kubectl does: --kubeconfig, else the files of KUBECONFIG (merged),
// else ~/.kube/config, else the pod's service account (in-cluster). The common credentials
// (a token, a token file, a client certificate, basic auth, the in-cluster token) are read here;
// a user with an `exec` plugin or an `auth-provider` is handed to @kubernetes/client-node,
// imported only then: importing it costs about 27 MiB of heap that every major collection marks
// (docs/adr/0017-own-kubeconfig-reader.md).
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { isIPv6 } from "node:net";
import { parse } from "yaml";

/** What KubeClient needs of a kubeconfig: the subset of client-node's KubeConfig it uses. */
export interface ClusterCredentials {
  getCurrentCluster(): { server: string; skipTLSVerify?: boolean; tlsServerName?: string | undefined } | null;
  /** Sets the TLS material (ca, cert, key, rejectUnauthorized) and the Authorization header, read fresh. */
  applyToHTTPSOptions(opts: HttpsOptions): Promise<void>;
}

export interface HttpsOptions {
  ca?: Buffer | string;
  cert?: Buffer | string;
  key?: Buffer | string;
  rejectUnauthorized?: boolean;
  servername?: string;
  headers?: Record<string, string>;
}

export interface LoadedKubeconfig {
  credentials: ClusterCredentials;
  /** The context in use ("inClusterContext" in a pod). */
  context: string;
  /** The context's namespace, or the pod's own in-cluster. */
  namespace?: string;
}

export interface LoadOptions {
  /** A file to read instead of KUBECONFIG and ~/.kube/config. */
  file?: string | undefined;
  /** A context to use instead of current-context. */
  context?: string | undefined;
  /** KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST and _PORT are read from it. */
  env: NodeJS.ProcessEnv;
  /** Where the pod's service account is mounted (tests). */
  serviceAccountDir?: string;
}

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

interface Cluster {
  name: string;
  server: string;
  caFile?: string;
  caData?: string;
  skipTLSVerify: boolean;
  tlsServerName?: string;
}

interface User {
  name: string;
  token?: string;
  tokenFile?: string;
  certFile?: string;
  certData?: string;
  keyFile?: string;
  keyData?: string;
  username?: string;
  password?: string;
  /** exec or auth-provider: client-node's. */
  plugin: boolean;
}

interface Context {
  name: string;
  cluster: string;
  user?: string;
  namespace?: string;
}

interface Parsed {
  clusters: Cluster[];
  users: User[];
  contexts: Context[];
  currentContext?: string;
}

type Raw = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const absolute = (root: string, file: string | undefined): string | undefined => (file === undefined || isAbsolute(file) ? file : join(root, file));

function list(doc: Raw, key: string, file: string): Raw[] {
  const v = doc[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Error(`kubeconfig ${file}: ${key} must be a list`);
  return v.map((e, i) => {
    if (typeof e !== "object" || e === null || Array.isArray(e)) throw new Error(`kubeconfig ${file}: ${key}[${i}] must be a mapping`);
    return e as Raw;
  });
}

function section(e: Raw, key: string): Raw | undefined {
  const v = e[key];
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Raw) : undefined;
}

/** One kubeconfig file, its relative paths made absolute against its directory (as kubectl does). */
export function parseKubeconfig(text: string, file: string): Parsed {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new Error(`kubeconfig ${file}: not YAML: ${(err as Error).message.split("\n")[0]}`);
  }
  if (doc === null || doc === undefined) doc = {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`kubeconfig ${file}: not a mapping`);
  const root = dirname(file);
  const d = doc as Raw;
  const clusters = list(d, "clusters", file).map((e, i): Cluster => {
    const name = str(e.name);
    if (!name) throw new Error(`kubeconfig ${file}: clusters[${i}].name is missing`);
    const c = section(e, "cluster");
    if (!c) throw new Error(`kubeconfig ${file}: clusters[${i}].cluster is missing`);
    const server = str(c.server);
    if (!server) throw new Error(`kubeconfig ${file}: clusters[${i}].cluster.server is missing`);
    const caFile = absolute(root, str(c["certificate-authority"]));
    const caData = str(c["certificate-authority-data"]);
    const tlsServerName = str(c["tls-server-name"]);
    return { name, server: server.replace(/\/$/, ""), skipTLSVerify: c["insecure-skip-tls-verify"] === true, ...(caFile ? { caFile } : {}), ...(caData ? { caData } : {}), ...(tlsServerName ? { tlsServerName } : {}) };
  });
  const users = list(d, "users", file).map((e, i): User => {
    const name = str(e.name);
    if (!name) throw new Error(`kubeconfig ${file}: users[${i}].name is missing`);
    const u = section(e, "user") ?? {};
    const pick = (k: string) => str(u[k]);
    const out: User = { name, plugin: section(u, "exec") !== undefined || section(u, "auth-provider") !== undefined };
    const fields: Array<[keyof User, string | undefined]> = [
      ["token", pick("token")],
      ["tokenFile", absolute(root, pick("tokenFile") ?? pick("token-file"))],
      ["certFile", absolute(root, pick("client-certificate"))],
      ["certData", pick("client-certificate-data")],
      ["keyFile", absolute(root, pick("client-key"))],
      ["keyData", pick("client-key-data")],
      ["username", pick("username")],
      ["password", pick("password")],
    ];
    for (const [k, v] of fields) if (v !== undefined) (out as unknown as Record<string, string>)[k] = v;
    return out;
  });
  const contexts = list(d, "contexts", file).map((e, i): Context => {
    const name = str(e.name);
    if (!name) throw new Error(`kubeconfig ${file}: contexts[${i}].name is missing`);
    const c = section(e, "context");
    if (!c) throw new Error(`kubeconfig ${file}: contexts[${i}].context is missing`);
    const cluster = str(c.cluster);
    if (!cluster) throw new Error(`kubeconfig ${file}: contexts[${i}].context.cluster is missing`);
    const user = str(c.user);
    const namespace = str(c.namespace);
    return { name, cluster, ...(user ? { user } : {}), ...(namespace ? { namespace } : {}) };
  });
  // Within one file a name is defined once (kubectl refuses the file); across files the first wins (merge).
  for (const [key, entries] of [["clusters", clusters], ["users", users], ["contexts", contexts]] as const) {
    const seen = new Set<string>();
    entries.forEach((e, i) => {
      if (seen.has(e.name)) throw new Error(`kubeconfig ${file}: ${key}[${i}].name "${e.name}" is defined twice in this file`);
      seen.add(e.name);
    });
  }
  const currentContext = str(d["current-context"]);
  return { clusters, users, contexts, ...(currentContext ? { currentContext } : {}) };
}

function readKubeconfig(file: string, from: string): Parsed {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`cannot read the kubeconfig ${file}${from}: ${code === "ENOENT" ? "no such file" : (err as Error).message}`);
  }
  return parseKubeconfig(text, file);
}

/**
 * KUBECONFIG's files merged as kubectl merges them: the first file to set current-context, or to
 * define a cluster, user or context of a name, wins; a later one of the same name is ignored
 * (kubeconfigs written by k3s and others all name theirs "default").
 */
function merge(all: Parsed[]): Parsed {
  const out: Parsed = { clusters: [], users: [], contexts: [] };
  for (const p of all) {
    out.currentContext ??= p.currentContext;
    firstWins(out.clusters, p.clusters);
    firstWins(out.users, p.users);
    firstWins(out.contexts, p.contexts);
  }
  return out;
}

/** Adds to `have` each of `more` whose name it does not hold yet (kubectl's merge rule). */
function firstWins<T extends { name: string }>(have: T[], more: readonly T[]): void {
  const names = new Set(have.map((x) => x.name));
  for (const e of more) {
    if (names.has(e.name)) continue;
    names.add(e.name);
    have.push(e);
  }
}

/** KUBECONFIG's files that exist: kubectl skips a listed file that does not exist. */
function existing(files: string[]): string[] {
  const found = files.filter((f) => existsSync(f));
  if (found.length === 0) throw new Error(`no kubeconfig: none of KUBECONFIG's files exists (${files.join(delimiter)}); pass --kubeconfig PATH or fix KUBECONFIG`);
  return found;
}

function inCluster(env: NodeJS.ProcessEnv, dir: string): Parsed {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error("in-cluster credentials need KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT");
  const scheme = port === "80" || port === "8080" || port === "8001" ? "http" : "https";
  const namespaceFile = join(dir, "namespace");
  const namespace = existsSync(namespaceFile) ? readFileSync(namespaceFile, "utf8").trim() : undefined;
  return {
    clusters: [{ name: "inCluster", server: `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`, caFile: join(dir, "ca.crt"), skipTLSVerify: false }],
    users: [{ name: "inClusterUser", tokenFile: join(dir, "token"), plugin: false }],
    contexts: [{ name: "inClusterContext", cluster: "inCluster", user: "inClusterUser", ...(namespace ? { namespace } : {}) }],
    currentContext: "inClusterContext",
  };
}

/** Credentials this module reads itself: files are read on every call, so rotated ones are used. */
class FileCredentials implements ClusterCredentials {
  constructor(
    private readonly cluster: Cluster,
    private readonly user: User | undefined,
  ) {}

  getCurrentCluster() {
    return { server: this.cluster.server, skipTLSVerify: this.cluster.skipTLSVerify, tlsServerName: this.cluster.tlsServerName };
  }

  async applyToHTTPSOptions(opts: HttpsOptions): Promise<void> {
    const c = this.cluster;
    const u = this.user;
    if (c.skipTLSVerify) opts.rejectUnauthorized = false;
    if (c.tlsServerName) opts.servername = c.tlsServerName;
    const ca = await material(c.caFile, c.caData, "certificate-authority");
    if (ca) opts.ca = ca;
    if (!u) return;
    const cert = await material(u.certFile, u.certData, "client-certificate");
    if (cert) opts.cert = cert;
    const key = await material(u.keyFile, u.keyData, "client-key");
    if (key) opts.key = key;
    const authorization = await this.authorization(u);
    if (authorization) opts.headers = { ...opts.headers, Authorization: authorization };
  }

  private async authorization(u: User): Promise<string | undefined> {
    if (u.token) return `Bearer ${u.token}`;
    if (u.tokenFile) {
      let token: string;
      try {
        token = (await readFile(u.tokenFile, "utf8")).trim();
      } catch (err) {
        throw new Error(`cannot read the token file ${u.tokenFile} of kubeconfig user "${u.name}": ${(err as Error).message}`);
      }
      return token ? `Bearer ${token}` : undefined;
    }
    if (u.username !== undefined) return `Basic ${Buffer.from(`${u.username}:${u.password ?? ""}`).toString("base64")}`;
    return undefined;
  }
}

async function material(file: string | undefined, data: string | undefined, field: string): Promise<Buffer | undefined> {
  if (file) {
    try {
      return await readFile(file);
    } catch (err) {
      throw new Error(`cannot read the kubeconfig's ${field} ${file}: ${(err as Error).message}`);
    }
  }
  return data ? Buffer.from(data, "base64") : undefined;
}

/**
 * The kubeconfig, as kubectl would find it. Throws with the file or field named when there is
 * none, when --context names no context, or when the context's cluster or user is missing.
 */
export async function loadKubeconfig(o: LoadOptions): Promise<LoadedKubeconfig> {
  const env = o.env;
  const saDir = o.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const files = (env.KUBECONFIG ?? "").split(delimiter).filter(Boolean);
  const home = env.HOME ?? homedir();
  let parsed: Parsed;
  let source: { files: string[] } | "in-cluster";
  if (o.file) {
    parsed = readKubeconfig(o.file, "");
    source = { files: [o.file] };
  } else if (files.length > 0) {
    const found = existing(files);
    parsed = merge(found.map((f) => readKubeconfig(f, " (from KUBECONFIG)")));
    source = { files: found };
  } else if (existsSync(join(home, ".kube", "config"))) {
    const file = join(home, ".kube", "config");
    parsed = readKubeconfig(file, "");
    source = { files: [file] };
  } else if (existsSync(join(saDir, "token"))) {
    parsed = inCluster(env, saDir);
    source = "in-cluster";
  } else throw new Error("no kubeconfig: KUBECONFIG is not set, ~/.kube/config does not exist and this is not a pod; pass --kubeconfig PATH or export KUBECONFIG");

  const name = o.context ?? parsed.currentContext;
  if (!name) throw new Error("the kubeconfig has no current-context: set one (kubectl config use-context NAME) or pass --context");
  const context = parsed.contexts.find((c) => c.name === name);
  if (!context) throw new ContextNotFoundError(name, o.context !== undefined);
  const cluster = parsed.clusters.find((c) => c.name === context.cluster);
  if (!cluster) throw new Error(`kubeconfig context "${name}" names cluster "${context.cluster}", which the kubeconfig does not define`);
  const user = context.user === undefined ? undefined : parsed.users.find((u) => u.name === context.user);
  if (context.user !== undefined && !user) throw new Error(`kubeconfig context "${name}" names user "${context.user}", which the kubeconfig does not define`);
  const namespace = context.namespace;
  const credentials = user?.plugin && source !== "in-cluster" ? await libraryCredentials(source.files, name) : new FileCredentials(cluster, user);
  return { credentials, context: name, ...(namespace ? { namespace } : {}) };
}

/** An exec plugin or auth-provider: @kubernetes/client-node's KubeConfig reads the same files and runs it. */
async function libraryCredentials(files: string[], context: string): Promise<ClusterCredentials> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromFile(files[0]!);
  for (const f of files.slice(1)) {
    const more = new KubeConfig();
    more.loadFromFile(f);
    // As merge() above: the first of a name wins (client-node's mergeConfig throws on a second).
    firstWins(kc.clusters, more.clusters);
    firstWins(kc.users, more.users);
    firstWins(kc.contexts, more.contexts);
  }
  kc.setCurrentContext(context);
  return kc;
}

export class ContextNotFoundError extends Error {
  constructor(
    readonly context: string,
    /** Named by --context (a usage error), not by current-context. */
    readonly fromFlag: boolean,
  ) {
    super(fromFlag ? `--context: context "${context}" does not exist in the kubeconfig` : `the kubeconfig's current-context "${context}" does not exist in it`);
    this.name = "ContextNotFoundError";
  }
}
