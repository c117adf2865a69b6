// A server's TLS certificate (the publish door's, the metrics server's): tls.crt and tls.key of a
// kubernetes.io/tls Secret mounted as files (PUBLISH_TLS_CERT_FILE and PUBLISH_TLS_KEY_FILE, or
// METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE), read at start and again whenever they
// change (the kubelet swaps a Secret volume's files atomically; cert-manager renews them), so a
// renewed certificate is served without a restart. A pair that does not read (half written, a
// key that does not match the certificate) is not used: the previous one stays, and the next
// change or check tries again. Nothing of the key is ever logged; a certificate is named by its
// SHA-256 fingerprint, subject and expiry.
import { X509Certificate, createPrivateKey } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Server as TlsServer } from "node:tls";

export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** Which server the files are for: the variables that name them, and the server in log lines. */
export interface TlsOwner {
  certVariable: string;
  keyVariable: string;
  /** "publish door", "metrics server". */
  server: string;
}

export const PUBLISH_TLS: TlsOwner = { certVariable: "PUBLISH_TLS_CERT_FILE", keyVariable: "PUBLISH_TLS_KEY_FILE", server: "publish door" };
export const METRICS_TLS: TlsOwner = { certVariable: "METRICS_TLS_CERT_FILE", keyVariable: "METRICS_TLS_KEY_FILE", server: "metrics server" };

export interface TlsPair {
  cert: Buffer;
  key: Buffer;
  /** SHA-256 fingerprint of the (first) certificate. */
  fingerprint: string;
  subject: string;
  notAfter: string;
}

/** The files cannot be used; `variable` names the setting at fault. */
export class TlsFilesError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = "TlsFilesError";
  }
}

async function read(path: string, variable: TlsFilesError["variable"]): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new TlsFilesError(variable, `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

/** Reads and checks a certificate and its key (PEM): both parse, and the key is the certificate's. */
export async function readTlsPair(files: TlsFiles, owner: TlsOwner = PUBLISH_TLS): Promise<TlsPair> {
  const [cert, key] = await Promise.all([read(files.certFile, owner.certVariable), read(files.keyFile, owner.keyVariable)]);
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw new TlsFilesError(owner.certVariable, `${files.certFile} is not a PEM certificate`);
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    // Not the parser's message: it could quote the key's bytes.
    throw new TlsFilesError(owner.keyVariable, `${files.keyFile} is not a PEM private key`);
  }
  if (!x509.checkPrivateKey(privateKey)) throw new TlsFilesError(owner.keyVariable, `${files.keyFile} is not the key of the certificate in ${files.certFile}`);
  return { cert, key, fingerprint: x509.fingerprint256, subject: x509.subject.replace(/\n/g, ", "), notAfter: new Date(x509.validTo).toISOString() };
}

export interface TlsLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
}

/** A server's certificate, kept current: load(), then serve() a TLS server with it. */
export class ReloadingTls {
  private watchers: FSWatcher[] = [];
  private poll: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private server: TlsServer | undefined;
  private reloading: Promise<void> | undefined;
  private again = false;
  /** Reloads that found a new certificate (for tests and the log). */
  reloads = 0;

  private constructor(
    private readonly files: TlsFiles,
    private pair: TlsPair,
    private readonly log: TlsLog,
    private readonly pollMs: number,
    private readonly owner: TlsOwner,
  ) {}

  /** Reads the pair once; throws TlsFilesError naming the variable when it cannot be used. */
  static async load(files: TlsFiles, log: TlsLog, opts: { pollMs?: number; owner?: TlsOwner } = {}): Promise<ReloadingTls> {
    const owner = opts.owner ?? PUBLISH_TLS;
    const pair = await readTlsPair(files, owner);
    log.info({ certificate: pair.fingerprint, subject: pair.subject, notAfter: pair.notAfter }, `${owner.server} serves HTTPS`);
    return new ReloadingTls(files, pair, log, opts.pollMs ?? 30_000, owner);
  }

  get current(): TlsPair {
    return this.pair;
  }

  /** Watches the files' folders (a Secret volume changes by renaming) and checks every pollMs besides, updating `server`. */
  serve(server: TlsServer): void {
    this.server = server;
    for (const dir of new Set([dirname(this.files.certFile), dirname(this.files.keyFile)])) {
      try {
        const w = watch(dir, { persistent: false }, () => this.changed());
        w.on("error", () => undefined);
        this.watchers.push(w);
      } catch {
        // No watch here (a file system without events): the periodic check still finds changes.
      }
    }
    this.poll = setInterval(() => this.changed(), this.pollMs);
    this.poll.unref();
  }

  private changed(): void {
    // A Secret update is several renames in a row: read once they settle.
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => void this.reload(), 100);
    this.debounce.unref();
  }

  /** Reads the files again; a new, valid pair replaces the served one. */
  reload(): Promise<void> {
    if (this.reloading) {
      this.again = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      do {
        this.again = false;
        try {
          const pair = await readTlsPair(this.files, this.owner);
          if (pair.fingerprint === this.pair.fingerprint && pair.key.equals(this.pair.key)) continue;
          this.server?.setSecureContext({ cert: pair.cert, key: pair.key });
          this.pair = pair;
          this.reloads++;
          this.log.info({ certificate: pair.fingerprint, subject: pair.subject, notAfter: pair.notAfter }, `${this.owner.server} certificate reloaded`);
        } catch (err) {
          this.log.warn({ err: (err as Error).message }, `${this.owner.server} certificate not reloaded; the previous one is still served`);
        }
      } while (this.again);
    })().finally(() => (this.reloading = undefined));
    return this.reloading;
  }

  close(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
    clearInterval(this.poll);
    clearTimeout(this.debounce);
  }
}
