// OAuth2 client credentials grant (RFC 6749 section 4.4) for subscriptions with spec.oauth2:
// a form-encoded POST to the token endpoint, through the same Sender as the webhooks (network
// guard, proxy, timeout, a response size cap). A token is kept per grant (the namespace, token
// URL, client credentials, scopes, audience and proxy: a rotated client secret is a new grant)
// until shortly before it expires; concurrent attempts share one token request. Errors name
// the token endpoint's status and OAuth2 error code, never the client secret or the token.
//
// The cache is bounded, since grants are made by tenants and lifetimes by token endpoints: an
// `expires_in` is believed up to MAX_TOKEN_LIFETIME_MS, and at most `maxTokensPerNamespace`
// tokens are kept per namespace and `maxTokens` in all (lib/tenant-lru.ts: the least recently used
// go first, and the total cap takes from the namespace holding the most). A token evicted is
// fetched again when next needed: more token requests, never a failed delivery.
import { TOKEN_ENDPOINT_CODE } from "../../core/attempt/classify.js";
import { RESPONSE_TOO_LARGE, type Sender } from "./sender.js";
import { TenantLru, type EvictionReason } from "../../lib/tenant-lru.js";

export { TOKEN_ENDPOINT_CODE };

export interface OAuth2Grant {
  /** A hash of everything that decides the token; never the values themselves. */
  key: string;
  /** The subscription's namespace: the cache's bounds are per namespace. */
  namespace: string;
  tokenURL: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  audience?: string;
  clientAuthentication: "ClientSecretBasic" | "ClientSecretPost";
  proxyUrl?: string;
}

export type TokenResult = { kind: "ok"; token: string } | { kind: "error"; code: string; message: string; durationMs: number; interrupted?: boolean };

export interface OAuth2ClientOptions {
  userAgent: string;
  /** Bytes of a token response read at most. Default 64 KiB. */
  maxResponseBytes?: number;
  /** Without expires_in, a token is used for this long (or until a 401). Default 1 h. */
  defaultLifetimeMs?: number;
  /** Tokens kept at most, in all. Default 4096. */
  maxTokens?: number;
  /** Tokens kept at most per namespace. Default 256. */
  maxTokensPerNamespace?: number;
  /** A token was dropped to stay within a bound (for a metric). */
  onEvict?: (reason: EvictionReason) => void;
  now?: () => number;
}

/** Longest an access token is used, whatever its expires_in says. */
export const MAX_TOKEN_LIFETIME_MS = 24 * 3_600_000;
export const DEFAULT_MAX_TOKENS = 4096;
export const DEFAULT_MAX_TOKENS_PER_NAMESPACE = 256;

/** A token expired this long ago is forgotten; they are looked for at most every PRUNE_EVERY_MS. */
const EXPIRED_KEPT_MS = 3_600_000;
const PRUNE_EVERY_MS = 60_000;

/** Longest access token accepted (it travels in a header). */
const MAX_TOKEN_LENGTH = 8192;
const TOKEN_CHARS = /^[\x20-\x7e]+$/;
const ERROR_CODE = /^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/;

interface Cached {
  token: string;
  /** A new token is fetched from here on. */
  refreshAt: number;
  expiresAt: number;
}

export class OAuth2Client {
  private readonly tokens: TenantLru<Cached>;
  private readonly inFlight = new Map<string, Promise<TokenResult>>();
  private readonly now: () => number;
  /** When tokens long expired are next looked for (prune). */
  private nextPruneAt = 0;
  /** Token requests sent, for tests and metrics. */
  requests = 0;

  constructor(
    private readonly sender: Sender,
    private readonly opts: OAuth2ClientOptions,
  ) {
    this.now = opts.now ?? Date.now;
    const onEvict = opts.onEvict;
    this.tokens = new TenantLru({
      max: opts.maxTokens ?? DEFAULT_MAX_TOKENS,
      maxPerNamespace: opts.maxTokensPerNamespace ?? DEFAULT_MAX_TOKENS_PER_NAMESPACE,
      ...(onEvict ? { onEvict: (reason: EvictionReason) => onEvict(reason) } : {}),
    });
  }

  /** Tokens held now, and in how many namespaces. */
  get cached(): { tokens: number; namespaces: number } {
    return { tokens: this.tokens.size, namespaces: this.tokens.namespaces };
  }

  /**
   * A token for `grant`: the cached one while it is fresh, else a new one (one request for
   * every caller asking at once). `replacing`: the endpoint refused this token (401), so it is
   * not returned again; if another caller already replaced it, that newer token is.
   */
  async token(grant: OAuth2Grant, o: { timeoutMs: number; signal?: AbortSignal; replacing?: string }): Promise<TokenResult> {
    const cached = this.tokens.get(grant.namespace, grant.key);
    if (cached && cached.token !== o.replacing && this.now() < cached.refreshAt) return { kind: "ok", token: cached.token };
    if (cached && cached.token === o.replacing) this.tokens.delete(grant.namespace, grant.key);
    let p = this.inFlight.get(grant.key);
    if (!p) {
      p = this.fetch(grant, o.timeoutMs, o.signal).finally(() => this.inFlight.delete(grant.key));
      this.inFlight.set(grant.key, p);
    }
    return p;
  }

  private async fetch(grant: OAuth2Grant, timeoutMs: number, signal: AbortSignal | undefined): Promise<TokenResult> {
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    if (grant.scopes.length) form.set("scope", grant.scopes.join(" "));
    if (grant.audience !== undefined) form.set("audience", grant.audience);
    const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json", "user-agent": this.opts.userAgent };
    if (grant.clientAuthentication === "ClientSecretBasic") {
      // RFC 6749 section 2.3.1: each part form-encoded, then joined by a colon.
      headers.authorization = `Basic ${Buffer.from(`${formEncode(grant.clientId)}:${formEncode(grant.clientSecret)}`).toString("base64")}`;
    } else {
      form.set("client_id", grant.clientId);
      form.set("client_secret", grant.clientSecret);
    }
    this.requests++;
    const limit = this.opts.maxResponseBytes ?? 65_536;
    const res = await this.sender.send({
      url: grant.tokenURL,
      headers,
      body: form.toString(),
      timeoutMs,
      responseBodyLimit: limit,
      ...(signal ? { signal } : {}),
      ...(grant.proxyUrl ? { proxyUrl: grant.proxyUrl } : {}),
    });
    const fail = (message: string): TokenResult => ({ kind: "error", code: TOKEN_ENDPOINT_CODE, message: `token endpoint: ${message}`, durationMs: res.durationMs });
    if (res.kind === "error") {
      if (res.code === RESPONSE_TOO_LARGE) return fail(`the answer is larger than ${limit} bytes`);
      return { ...res, message: `token endpoint: ${res.message}` };
    }
    const answer = tokenAnswer(res.status, res.body ?? "");
    if (answer.kind === "error") return fail(answer.message);
    const { token, body } = answer;
    const expiresIn = Number(body.expires_in);
    const now = this.now();
    const said = body.expires_in !== undefined && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn * 1000 : (this.opts.defaultLifetimeMs ?? 3_600_000);
    const lifetimeMs = Math.min(said, MAX_TOKEN_LIFETIME_MS);
    // Refreshed before it expires: a request started just before the expiry still carries a valid token.
    const skewMs = Math.min(60_000, lifetimeMs / 10);
    this.prune(now);
    this.tokens.set(grant.namespace, grant.key, { token, refreshAt: now + lifetimeMs - skewMs, expiresAt: now + lifetimeMs });
    return { kind: "ok", token };
  }

  /**
   * Forgets tokens long expired (rotated client secrets, deleted subscriptions): a scan of every
   * token held, so at most once a minute, not at every new token.
   */
  private prune(now: number): void {
    if (now < this.nextPruneAt) return;
    this.nextPruneAt = now + PRUNE_EVERY_MS;
    this.tokens.prune((t) => now > t.expiresAt + EXPIRED_KEPT_MS);
  }
}

/** The access token in a token endpoint's answer, or why there is none usable. */
function tokenAnswer(status: number, text: string): { kind: "ok"; token: string; body: Record<string, unknown> } | { kind: "error"; message: string } {
  const body = parseJson(text);
  if (status < 200 || status > 299) {
    const code = typeof body?.error === "string" && ERROR_CODE.test(body.error) ? ` (${body.error})` : "";
    return { kind: "error", message: `answered ${status}${code}` };
  }
  if (!body) return { kind: "error", message: `answered ${status} without a JSON object` };
  const token = body.access_token;
  if (typeof token !== "string" || token === "") return { kind: "error", message: "the answer has no access_token" };
  if (token.length > MAX_TOKEN_LENGTH || !TOKEN_CHARS.test(token)) return { kind: "error", message: `the access_token is not a printable ASCII string of at most ${MAX_TOKEN_LENGTH} characters` };
  const type = body.token_type;
  if (type !== undefined && (typeof type !== "string" || type.toLowerCase() !== "bearer")) {
    return { kind: "error", message: `token_type ${typeof type === "string" && ERROR_CODE.test(type) ? `"${type}"` : "(not a string)"} is not Bearer` };
  }
  return { kind: "ok", token, body };
}

function formEncode(v: string): string {
  return new URLSearchParams({ v }).toString().slice(2);
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
