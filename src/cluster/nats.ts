// A local nats-server with JetStream on 127.0.0.1, for stream mode: beside the control plane
// (`hookline cluster up --nats`, `hookline dev --nats`, recorded in the cluster's state.json) or
// on its own (LocalNatsServer, for tests). It runs detached in its own process group like etcd,
// its command line names its directory (the marker procs.ts checks before any signal), and the
// reaper kills it with the rest when the process that started it dies, even by SIGKILL.
//
// Layout inside DIR:
//   nats/jetstream/            the JetStream store (kept across stop/start, like etcd's data)
//   nats-auth/                 with authentication: its users and config (nats-auth.ts)
//   logs/nats-server.log       its stdout+stderr (appended: a restart keeps the earlier lines)
//   state.json                 LocalNatsServer only: pgid, ports and reaper (the reaper reads it)
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { dirname, join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { addNatsPublisher, ensureNatsAuth, LOCAL_SERVER_NAME, natsAuthPaths as natsAuthFiles, urlWithCredentials, type NatsAuthPolicy, type NatsPublisher, type NatsUser } from "./nats-auth.js";
import { freePorts, isPortFree, saysPortTaken } from "./ports.js";
import { groupMembers, isAlive, isOurGroup, signalGroup } from "./procs.js";
import { spawnReaper, stopReaper } from "./reaper.js";

export interface NatsPorts {
  /** Client port: nats://127.0.0.1:PORT. */
  client: number;
  /** HTTP monitoring port (/healthz, /varz), on 127.0.0.1 too. */
  monitor: number;
}

export interface LaunchNatsOptions {
  /** The nats-server binary (see ensureNatsServer). */
  binary: string;
  /** Directory holding the store and the log; it also marks the process as ours. */
  dir: string;
  /** Ports that must be used ("port N is already in use" otherwise). */
  ports?: Partial<NatsPorts>;
  /** Ports of an earlier run, used when still free (a stable URL across restarts). */
  preferred?: NatsPorts;
  /** Startup deadline (default 30 s). */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /** Called with the pid (= pgid) right after the spawn, before readiness: record it for the reaper. */
  onSpawn?: (pgid: number) => void;
  /** A config file (accounts and users: nats-auth.ts); the command line still sets ports and the store. */
  config?: string;
  /** Where the store and the log go, instead of DIR/nats and DIR/logs/nats-server.log (a cluster's nodes: nats-cluster.ts). */
  paths?: { storeDir: string; log: string };
}

export interface LaunchedNats {
  pid: number;
  /** The process group (detached: equal to the pid). */
  pgid: number;
  ports: NatsPorts;
  /** nats://127.0.0.1:PORT */
  url: string;
  /** The server's version from /varz, e.g. 2.15.2. */
  version: string;
  storeDir: string;
  log: string;
}

const HOST = "127.0.0.1";

const DEFAULT_TIMEOUT_MS = 30_000;
const POLL_MS = 50;
const STOP_GRACE_MS = 10_000;
const KILL_WAIT_MS = 5_000;

export const natsPaths = (dir: string) => ({
  storeDir: join(dir, "nats"),
  logs: join(dir, "logs"),
  log: join(dir, "logs", "nats-server.log"),
  state: join(dir, "state.json"),
});

export const natsUrl = (port: number): string => `nats://${HOST}:${port}`;

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(empty log)";
  } catch {
    return "(no log)";
  }
}

export function httpGet(url: string, timeoutMs = 1_000): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const req = request(url, { method: "GET", timeout: timeoutMs, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end();
  });
}

async function choosePorts(explicit: Partial<NatsPorts>, preferred?: NatsPorts): Promise<NatsPorts> {
  if (preferred && preferred.client !== preferred.monitor) {
    const wanted = { client: explicit.client ?? preferred.client, monitor: explicit.monitor ?? preferred.monitor };
    const free = await Promise.all((["client", "monitor"] as const).map(async (k) => explicit[k] !== undefined || (await isPortFree(wanted[k]))));
    if (wanted.client !== wanted.monitor && free.every(Boolean)) return wanted;
  }
  const taken = new Set([explicit.client, explicit.monitor].filter((p): p is number => p !== undefined));
  const pool = (await freePorts(2 + taken.size)).filter((p) => !taken.has(p));
  return { client: explicit.client ?? pool.shift()!, monitor: explicit.monitor ?? pool.shift()! };
}

class NatsStartupError extends Error {
  override readonly name = "NatsStartupError";
  constructor(
    message: string,
    readonly portConflict: boolean,
  ) {
    super(message);
  }
}

/**
 * Starts nats-server with JetStream (store in DIR/nats) on 127.0.0.1 and resolves once
 * /healthz answers ok (JetStream is up and its store recovered). A port taken between the
 * check and the bind is retried with other ports unless the ports were explicit.
 */
export async function launchNatsServer(opts: LaunchNatsOptions): Promise<LaunchedNats> {
  const dir = resolve(opts.dir);
  if (!existsSync(opts.binary)) throw new Error(`nats-server not found at ${opts.binary} (run hack/build-nats.sh)`);
  const explicit = opts.ports ?? {};
  for (const [which, port] of Object.entries(explicit)) {
    if (port === undefined) continue;
    if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`invalid nats-server ${which} port: ${port}`);
    if (!(await isPortFree(port))) throw new Error(`port ${port} is already in use (requested for the nats-server ${which} port)`);
  }
  let preferred = opts.preferred;
  for (let attempt = 1; ; attempt++) {
    const ports = await choosePorts(explicit, preferred);
    preferred = undefined;
    try {
      return await launchOnce({ ...opts, dir }, ports);
    } catch (err) {
      const explicitAny = explicit.client !== undefined || explicit.monitor !== undefined;
      if (!(err instanceof NatsStartupError && err.portConflict && !explicitAny && attempt < 3)) throw err;
    }
  }
}

async function launchOnce(opts: LaunchNatsOptions & { dir: string }, ports: NatsPorts): Promise<LaunchedNats> {
  const p = opts.paths ? { ...opts.paths, logs: dirname(opts.paths.log) } : natsPaths(opts.dir);
  for (const d of [opts.dir, p.storeDir, p.logs]) mkdirSync(d, { recursive: true, mode: 0o700 });
  const fd = openSync(p.log, "a", 0o600);
  let child;
  try {
    child = spawn(
      opts.binary,
      [
        // A reload (SIGHUP) reads the config file, not the command line: the server's name is in the file then.
        ...(opts.config ? ["-c", opts.config] : ["--server_name", LOCAL_SERVER_NAME]),
        ...["--addr", HOST, "--port", String(ports.client), "--http_port", String(ports.monitor), "--jetstream", "--store_dir", p.storeDir],
      ],
      // detached: its own process group, out of reach of a Ctrl-C in the terminal.
      { cwd: opts.dir, detached: true, stdio: ["ignore", fd, fd], env: opts.env },
    );
  } finally {
    closeSync(fd);
  }
  let exit: string | undefined;
  child.on("exit", (code, signal) => (exit = signal ? `was killed by ${signal}` : `exited with code ${code}`));
  child.on("error", (err) => (exit = `could not be started: ${err.message}`));
  const pid = child.pid;
  if (pid === undefined) {
    await delay(POLL_MS);
    throw new Error(`nats-server ${exit ?? "could not be started"}; last lines of ${p.log}:\n${tail(p.log)}`);
  }
  opts.onSpawn?.(pid);
  const deadline = Date.now() + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const monitor = `http://${HOST}:${ports.monitor}`;
  let last = "";
  try {
    for (;;) {
      if (exit !== undefined) {
        const log = tail(p.log);
        throw new NatsStartupError(`nats-server ${exit} while starting; last lines of ${p.log}:\n${log}`, saysPortTaken(log));
      }
      try {
        const health = await httpGet(`${monitor}/healthz`);
        if (health.status === 200) break;
        last = `/healthz answered ${health.status}: ${health.body.trim()}`;
      } catch (err) {
        last = (err as Error).message;
      }
      if (Date.now() > deadline) throw new NatsStartupError(`nats-server was not healthy within ${opts.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms (last: ${last}); last lines of ${p.log}:\n${tail(p.log)}`, false);
      await delay(POLL_MS);
    }
    const varz = JSON.parse((await httpGet(`${monitor}/varz`)).body) as { version?: string; jetstream?: { config?: unknown } };
    if (!varz.jetstream?.config) throw new NatsStartupError(`nats-server at ${natsUrl(ports.client)} runs without JetStream`, false);
    child.unref();
    return { pid, pgid: pid, ports, url: natsUrl(ports.client), version: varz.version ?? "unknown", storeDir: p.storeDir, log: p.log };
  } catch (err) {
    await stopNatsGroup(pid, opts.dir, 3_000).catch(() => undefined);
    child.unref();
    throw err;
  }
}

/**
 * Makes nats-server read its config file again (SIGHUP: new users take effect, connections stay)
 * and resolves once /varz says it did.
 */
export async function reloadNatsServer(pgid: number, marker: string, monitorPort: number, timeoutMs = 10_000): Promise<void> {
  if (!isOurGroup(pgid, marker)) throw new Error(`nats-server (process group ${pgid}) is not running`);
  const loadedAt = async () => (JSON.parse((await httpGet(`http://${HOST}:${monitorPort}/varz`)).body) as { config_load_time?: string }).config_load_time;
  const before = await loadedAt();
  signalGroup(pgid, "SIGHUP");
  const deadline = Date.now() + timeoutMs;
  while ((await loadedAt()) === before) {
    if (Date.now() > deadline) throw new Error(`nats-server did not reload its config within ${timeoutMs} ms`);
    await delay(POLL_MS);
  }
}

/** SIGTERM to the group (nats-server flushes its store and exits), SIGKILL after `graceMs`; verifies it is gone. */
export async function stopNatsGroup(pgid: number, marker: string, graceMs = STOP_GRACE_MS): Promise<void> {
  if (!isOurGroup(pgid, marker)) return;
  const gone = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    while (groupMembers(pgid).length > 0) {
      if (Date.now() > until) return false;
      await delay(POLL_MS);
    }
    return true;
  };
  signalGroup(pgid, "SIGTERM");
  if (await gone(graceMs)) return;
  signalGroup(pgid, "SIGKILL");
  if (await gone(KILL_WAIT_MS)) return;
  throw new Error(`nats-server (process group ${pgid}) still alive after SIGKILL`);
}

// ---------------------------------------------------------------------------------------------
// On its own: a private nats-server, e.g. one per test file.

interface LocalState {
  dir: string;
  pgids: { "nats-server"?: number };
  reaperPid?: number;
  ports?: NatsPorts;
}

export interface LocalNatsOptions {
  dir: string;
  binary: string;
  /** A fixed client port; free ports are picked otherwise (and kept across restart()). */
  port?: number;
  /** Kill it when this process dies, even by SIGKILL (default true). */
  attachToParent?: boolean;
  env?: NodeJS.ProcessEnv;
  /**
   * Users and what each may do (nats-auth.ts): nobody gets in without a user and password.
   * Without it the server lets anyone in, as nats-server does by default.
   */
  auth?: NatsAuthPolicy;
  /**
   * TLS (PEM files): clients must use it (tls://); with `verify`, they must also present a
   * certificate signed by `caFile`, which is then how they authenticate (with or without users).
   */
  tls?: { certFile: string; keyFile: string; caFile: string; verify?: boolean };
}

/** DIR/local.conf: the users' config (included) and TLS, when the server has either. */
function localConfig(dir: string, opts: Pick<LocalNatsOptions, "auth" | "tls">): string | undefined {
  if (!opts.auth && !opts.tls) return undefined;
  const q = (v: string) => JSON.stringify(v);
  const lines = ["# Written by LocalNatsServer: this server's users (nats-auth/) and TLS."];
  // The users' config names the server; without it, this file does (a reload reads no command line).
  lines.push(opts.auth ? `include ${q("./nats-auth/nats-server.conf")}` : `server_name: ${q(LOCAL_SERVER_NAME)}`);
  if (opts.tls) {
    const t = opts.tls;
    lines.push(`tls: { cert_file: ${q(t.certFile)}, key_file: ${q(t.keyFile)}, ca_file: ${q(t.caFile)}, verify: ${t.verify === true} }`);
  }
  const file = join(dir, "local.conf");
  writeFileSync(file, `${lines.join("\n")}\n`, { mode: 0o600 });
  return file;
}

/**
 * A nats-server of its own in DIR: start, stop, kill (a crash) and restart on the same port and
 * store, so a test can take JetStream away mid-test and bring it back with its messages.
 */
export class LocalNatsServer {
  private state: LocalState;
  private info: LaunchedNats | undefined;
  private operatorUser: NatsUser | undefined;
  private adminUser: NatsUser | undefined;
  private config: string | undefined;

  private constructor(private readonly opts: LocalNatsOptions & { dir: string }) {
    this.state = { dir: opts.dir, pgids: {} };
  }

  static async start(opts: LocalNatsOptions): Promise<LocalNatsServer> {
    const server = new LocalNatsServer({ ...opts, dir: resolve(opts.dir) });
    if (opts.auth) {
      const users = ensureNatsAuth(server.opts.dir, opts.auth);
      server.operatorUser = users.operator;
      server.adminUser = users.admin;
    }
    if (opts.auth || opts.tls) mkdirSync(server.opts.dir, { recursive: true, mode: 0o700 });
    server.config = localConfig(server.opts.dir, opts);
    if (opts.attachToParent !== false) {
      mkdirSync(server.opts.dir, { recursive: true, mode: 0o700 });
      server.writeState();
      server.state.reaperPid = spawnReaper(process.pid, natsPaths(server.opts.dir).state);
      server.writeState();
    }
    try {
      await server.launch();
    } catch (err) {
      server.stopReaper();
      throw err;
    }
    return server;
  }

  /** nats://127.0.0.1:PORT, or tls://127.0.0.1:PORT with TLS (the same across restarts). */
  get url(): string {
    const url = natsUrl(this.ports.client);
    return this.opts.tls ? url.replace(/^nats:/, "tls:") : url;
  }

  /** The operator's user and password, with authentication (undefined without). */
  get operator(): (NatsUser & { passwordFile: string }) | undefined {
    return this.operatorUser && { ...this.operatorUser, passwordFile: natsAuthFiles(this.opts.dir).operatorPassword };
  }

  /** The URL with the operator's credentials (nats://hookline-operator:PASSWORD@127.0.0.1:PORT); the plain URL without authentication. */
  get operatorUrl(): string {
    return this.operatorUser ? urlWithCredentials(this.url, this.operatorUser) : this.url;
  }

  /** The URL with the admin's credentials (auth.admin), who may do anything in the account; the plain URL without authentication. */
  get adminUrl(): string {
    if (this.opts.auth && !this.adminUser) throw new Error("this nats-server has no admin user (auth.admin)");
    return this.adminUser ? urlWithCredentials(this.url, this.adminUser) : this.url;
  }

  /**
   * A publisher of `namespaces` (made when missing: nats-server reloads its config) and its URL
   * with credentials. Throws without authentication.
   */
  async publisher(namespaces: readonly string[]): Promise<NatsPublisher & { url: string }> {
    if (!this.opts.auth) throw new Error("this nats-server runs without authentication: it has no publishers");
    const { publisher, added } = addNatsPublisher(this.opts.dir, this.opts.auth, namespaces);
    const pgid = this.state.pgids["nats-server"];
    if (added && this.running && pgid !== undefined) await reloadNatsServer(pgid, this.opts.dir, this.ports.monitor);
    return { ...publisher, url: urlWithCredentials(this.url, publisher) };
  }

  get ports(): NatsPorts {
    const ports = this.info?.ports ?? this.state.ports;
    if (!ports) throw new Error("nats-server was never started");
    return ports;
  }

  get dir(): string {
    return this.opts.dir;
  }

  get version(): string {
    return this.info?.version ?? "unknown";
  }

  /** Whether the server process is alive. */
  get running(): boolean {
    const pgid = this.state.pgids["nats-server"];
    return pgid !== undefined && isAlive(pgid);
  }

  private writeState(): void {
    const file = natsPaths(this.opts.dir).state;
    writeFileSync(`${file}.tmp`, `${JSON.stringify(this.state, null, 2)}\n`, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  }

  private async launch(): Promise<void> {
    const fixed = this.state.ports ?? (this.opts.port !== undefined ? { client: this.opts.port } : undefined);
    this.info = await launchNatsServer({
      binary: this.opts.binary,
      dir: this.opts.dir,
      ...(fixed ? { ports: fixed } : {}),
      ...(this.opts.env ? { env: this.opts.env } : {}),
      ...(this.config ? { config: this.config } : {}),
      onSpawn: (pgid) => {
        this.state.pgids["nats-server"] = pgid;
        this.writeState();
      },
    });
    this.state.ports = this.info.ports;
    this.writeState();
  }

  /** Graceful stop (SIGTERM): the store is flushed. */
  async stop(): Promise<void> {
    const pgid = this.state.pgids["nats-server"];
    if (pgid !== undefined) await stopNatsGroup(pgid, this.opts.dir);
  }

  /** A crash: SIGKILL, nothing flushed. Resolves once the process is gone. */
  async kill(): Promise<void> {
    const pgid = this.state.pgids["nats-server"];
    if (pgid === undefined || !isOurGroup(pgid, this.opts.dir)) return;
    signalGroup(pgid, "SIGKILL");
    const until = Date.now() + KILL_WAIT_MS;
    while (groupMembers(pgid).length > 0) {
      if (Date.now() > until) throw new Error(`nats-server (process group ${pgid}) still alive after SIGKILL`);
      await delay(POLL_MS);
    }
  }

  /** Starts it again on the same ports with the same store (after stop() or kill(); stops it first otherwise). */
  async restart(): Promise<void> {
    if (this.running) await this.stop();
    await this.launch();
  }

  /** Stops the server and its reaper for good. */
  async close(): Promise<void> {
    try {
      await this.stop();
    } finally {
      this.stopReaper();
    }
  }

  private stopReaper(): void {
    stopReaper(this.state.reaperPid, this.opts.dir);
    this.state.reaperPid = undefined;
  }
}
