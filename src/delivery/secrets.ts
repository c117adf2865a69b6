// Signing secrets, read from the Secret in the delivery's namespace and kept for a short time
// (rotation is picked up within the TTL). Values never leave this module except as the Buffers
// handed to the signer: not in logs, status, Events or metrics.
import { ApiError, type KubeClient } from "../kube/client.js";
import { objectPath, CORE } from "../kube/types.js";
import type { SecretView } from "../core/plan.js";
import type { Policy } from "../core/policy.js";
import { SecretNotVerifiableError, signingKey, type SignatureScheme } from "../core/signing.js";

export type SecretLookup =
  | { kind: "ok"; keys: Buffer[] }
  /** `reason` SecretNotVerifiable: the value exists but the scheme cannot sign with it. */
  | { kind: "missing"; message: string; reason?: "SecretNotVerifiable" };

interface Entry {
  at: number;
  data: Record<string, string> | undefined; // undefined: the Secret does not exist
  error?: string;
}

export class SecretCache {
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Map<string, Promise<Entry>>();

  constructor(
    private readonly client: KubeClient,
    private readonly opts: { ttlMs?: number; missingTtlMs?: number; now?: () => number } = {},
  ) {}

  /** The signing keys for a secretRef: the current one first, then the previous one if present. */
  async keys(namespace: string, ref: { name: string; key: string; previousKey?: string; scheme?: SignatureScheme }): Promise<SecretLookup> {
    const entry = await this.entry(namespace, ref.name);
    if (entry.error) return { kind: "missing", message: `cannot read Secret ${ref.name}: ${entry.error}` };
    if (!entry.data) return { kind: "missing", message: `Secret ${ref.name} not found in namespace ${namespace}` };
    const current = entry.data[ref.key];
    if (current === undefined || current === "") return { kind: "missing", message: `Secret ${ref.name} has no key "${ref.key}"` };
    const keys: Buffer[] = [];
    const scheme = ref.scheme ?? "StandardWebhooks";
    let key = ref.key;
    try {
      keys.push(signingKey(current, scheme));
      const previous = ref.previousKey ? entry.data[ref.previousKey] : undefined;
      key = ref.previousKey ?? key;
      if (previous) keys.push(signingKey(previous, scheme));
    } catch (err) {
      // The message says what is wrong with the value, never the value.
      const message = `Secret ${ref.name} key "${key}"${err instanceof SecretNotVerifiableError ? " " : ": "}${(err as Error).message}`;
      return { kind: "missing", message, ...(err instanceof SecretNotVerifiableError ? { reason: "SecretNotVerifiable" as const } : {}) };
    }
    return { kind: "ok", keys };
  }

  private async entry(namespace: string, name: string): Promise<Entry> {
    const key = `${namespace}/${name}`;
    const now = (this.opts.now ?? Date.now)();
    const cached = this.entries.get(key);
    const ttl = cached?.data ? (this.opts.ttlMs ?? 30_000) : (this.opts.missingTtlMs ?? 2_000);
    if (cached && now - cached.at < ttl) return cached;
    let p = this.pending.get(key);
    if (!p) {
      p = this.fetch(namespace, name, now).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    const entry = await p;
    this.entries.set(key, entry);
    return entry;
  }

  private async fetch(namespace: string, name: string, now: number): Promise<Entry> {
    try {
      const secret = await this.client.request<{ data?: Record<string, string> }>({ method: "GET", path: objectPath(CORE.secrets, namespace, name) });
      const data: Record<string, string> = {};
      for (const [k, v] of Object.entries(secret.data ?? {})) data[k] = Buffer.from(v, "base64").toString("utf8");
      return { at: now, data };
    } catch (err) {
      if (err instanceof ApiError && err.isNotFound) return { at: now, data: undefined };
      if (err instanceof ApiError && err.status === 403) return { at: now, data: undefined, error: "forbidden (check the operator's RBAC for secrets)" };
      throw err;
    }
  }
}

/**
 * The signing keys for plan(), looked up only when an attempt may follow (`due`, not paused):
 * a delivery waiting for its backoff or a paused subscription costs no Secret read.
 */
export async function signingKeys(secrets: Pick<SecretCache, "keys">, namespace: string, policy: Policy | undefined, due: boolean): Promise<{ secret: SecretView; keys: Buffer[] }> {
  if (!policy?.secretRef || !due || policy.paused) return { secret: { kind: "none" }, keys: [] };
  const lookup = await secrets.keys(namespace, policy.secretRef);
  return lookup.kind === "ok" ? { secret: { kind: "ok" }, keys: lookup.keys } : { secret: lookup, keys: [] };
}
