// Secrets subscriptions reference (signing keys, header values, OAuth2 client credentials, a
// client certificate, a CA bundle), read from the subscription's namespace and kept for a
// short time, so a rotation (a renewed cert-manager certificate, a new key) is picked up within
// the TTL without a restart. Only the keys asked for are kept: the rest of a Secret is dropped
// as soon as it is read, and a Secret nobody asked for in a while is forgotten. Values never
// leave this module except to the signer and to credentials.ts: not in logs, status, Events or
// metrics; messages name the Secret and the key, never a value.
import { ApiError, type KubeClient } from "../../kube/client.js";
import { objectPath, CORE } from "../../kube/types.js";
import { SecretNotVerifiableError, signingKey, type SignatureScheme } from "../../core/request/signing.js";

export type SecretLookup =
  | { kind: "ok"; keys: Buffer[] }
  /** `reason` SecretNotVerifiable: the value exists but the scheme cannot sign with it. */
  | { kind: "missing"; message: string; reason?: "SecretNotVerifiable" };

/** Some keys of one Secret: those that exist, decoded as UTF-8. */
export type SecretRead = { kind: "ok"; type: string | undefined; data: Record<string, string> } | { kind: "missing"; message: string };

interface Entry {
  at: number;
  /** The keys this read kept. */
  wanted: Set<string>;
  data: Record<string, string> | undefined; // undefined: the Secret does not exist
  type?: string;
  error?: string;
  /** The signing keys worked out from this read, by secretRef: asked for every attempt, decoded once. */
  signing?: Map<string, SecretLookup>;
}

export interface SecretCacheOptions {
  /** How long a read Secret is used before it is read again (rotation delay). Default 30 s. */
  ttlMs?: number;
  /** How long "not found" is believed. Default 2 s. */
  missingTtlMs?: number;
  now?: () => number;
}

export class SecretCache {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<Entry>>();
  /** Per Secret, when each key was last asked for: what the next read keeps. */
  private readonly asked = new Map<string, Map<string, number>>();
  private lastPrune = 0;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: SecretCacheOptions = {},
  ) {
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.now = opts.now ?? Date.now;
  }

  /** The signing keys for a secretRef: the current one first, then the previous one if present. */
  async keys(namespace: string, ref: { name: string; key: string; previousKey?: string; scheme?: SignatureScheme }): Promise<SecretLookup> {
    const names = ref.previousKey ? [ref.key, ref.previousKey] : [ref.key];
    const entry = await this.entry(namespace, ref.name, names);
    // spec.secretRef's key and previousKey are any text: joined unambiguously.
    const memo = JSON.stringify([ref.key, ref.previousKey ?? null, ref.scheme ?? "StandardWebhooks"]);
    const known = entry.signing?.get(memo);
    if (known) return known;
    const lookup = signingKeys(readOf(entry, namespace, ref.name, names), ref);
    (entry.signing ??= new Map()).set(memo, lookup);
    return lookup;
  }

  /**
   * The keys `keys` of Secret `name` (those it has; a missing key is simply absent from
   * `data`). "missing" when the Secret does not exist or cannot be read.
   */
  async read(namespace: string, name: string, keys: string[]): Promise<SecretRead> {
    return readOf(await this.entry(namespace, name, keys), namespace, name, keys);
  }

  /** Secrets held now, and their keys (for tests: only referenced keys are kept). */
  heldKeys(): Map<string, string[]> {
    return new Map([...this.entries].map(([id, e]) => [id, Object.keys(e.data ?? {})]));
  }

  private async entry(namespace: string, name: string, keys: string[]): Promise<Entry> {
    const id = `${namespace}/${name}`;
    const now = this.now();
    this.prune(now);
    let asked = this.asked.get(id);
    if (!asked) this.asked.set(id, (asked = new Map<string, number>()));
    for (const k of keys) asked.set(k, now);
    // Twice at most: a read already under way may lack a key this caller needs.
    for (let round = 0; ; round++) {
      const cached = this.entries.get(id);
      const ttl = cached?.data ? this.ttlMs : (this.opts.missingTtlMs ?? 2_000);
      const fresh = cached !== undefined && now - cached.at < ttl;
      if (cached && fresh && (!cached.data || keys.every((k) => cached.wanted.has(k)))) return cached;
      let p = this.pending.get(id);
      if (!p || round > 0) {
        // Every key asked for within two TTLs: a key no subscription names any more is dropped.
        const wanted = new Set([...asked].filter(([, at]) => now - at < 2 * this.ttlMs).map(([k]) => k));
        for (const k of keys) wanted.add(k);
        p = this.fetch(namespace, name, wanted, now).finally(() => {
          if (this.pending.get(id) === p) this.pending.delete(id);
        });
        this.pending.set(id, p);
      }
      const entry = await p;
      this.entries.set(id, entry);
      if (!entry.data || keys.every((k) => entry.wanted.has(k)) || round > 0) return entry;
    }
  }

  /** Forgets Secrets no one asked for in a while (deleted subscriptions, changed references). */
  private prune(now: number): void {
    if (now - this.lastPrune < this.ttlMs) return;
    this.lastPrune = now;
    for (const [id, asked] of this.asked) {
      const last = Math.max(0, ...asked.values());
      if (now - last < 4 * this.ttlMs) continue;
      this.asked.delete(id);
      if (!this.pending.has(id)) this.entries.delete(id);
    }
  }

  private async fetch(namespace: string, name: string, wanted: Set<string>, now: number): Promise<Entry> {
    try {
      const secret = await this.client.request<{ type?: string; data?: Record<string, string> }>({ method: "GET", path: objectPath(CORE.secrets, namespace, name) });
      const data: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret.data ?? {})) if (wanted.has(k)) data[k] = Buffer.from(v, "base64").toString("utf8");
      return { at: now, wanted, data, ...(secret.type ? { type: secret.type } : {}) };
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) return { at: now, wanted, data: undefined };
      if (err instanceof ApiError && err.status === 403) return { at: now, wanted, data: undefined, error: "forbidden (check the operator's RBAC for secrets)" };
      throw err;
    }
  }
}

/** The signing keys of a secretRef from what a read of its Secret kept. */
function signingKeys(read: SecretRead, ref: { name: string; key: string; previousKey?: string; scheme?: SignatureScheme }): SecretLookup {
  if (read.kind === "missing") return read;
  const current = read.data[ref.key];
  if (current === undefined || current === "") return { kind: "missing", message: `Secret ${ref.name} has no key "${ref.key}"` };
  const keys: Buffer[] = [];
  const scheme = ref.scheme ?? "StandardWebhooks";
  let key = ref.key;
  try {
    keys.push(signingKey(current, scheme));
    const previous = ref.previousKey ? read.data[ref.previousKey] : undefined;
    key = ref.previousKey ?? key;
    if (previous) keys.push(signingKey(previous, scheme));
  } catch (err) {
    // The message says what is wrong with the value, never the value.
    const message = `Secret ${ref.name} key "${key}"${err instanceof SecretNotVerifiableError ? " " : ": "}${(err as Error).message}`;
    return { kind: "missing", message, ...(err instanceof SecretNotVerifiableError ? { reason: "SecretNotVerifiable" as const } : {}) };
  }
  return { kind: "ok", keys };
}

/** Some keys of one read Secret. */
function readOf(entry: Entry, namespace: string, name: string, keys: string[]): SecretRead {
  if (entry.error) return { kind: "missing", message: `cannot read Secret ${name}: ${entry.error}` };
  if (!entry.data) return { kind: "missing", message: `Secret ${name} not found in namespace ${namespace}` };
  const data: Record<string, string> = {};
  for (const k of keys) if (entry.data[k] !== undefined) data[k] = entry.data[k];
  return { kind: "ok", type: entry.type, data };
}
