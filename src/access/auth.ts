// Who is calling a server of ours (the publish door; the metrics server: metrics-guard.ts)?
// For the publish door: who is calling, and may they create deliveries in this namespace? The
// caller's bearer token is checked with a TokenReview for the door's audiences (`hookline` by
// default: a ServiceAccount token projected for Hookline, not the caller's API credential) and
// the caller with a SubjectAccessReview for `create webhookdeliveries.hookline.dev` (and, when a
// delivery of the event exists, for `get`: the caller is told only what it could read itself),
// both answered by the API server with its own authenticators and authorizers (RBAC, webhooks...).
// Answers are kept briefly (default 10 s, bounded) and concurrent identical questions share one
// request, so a burst from one service costs two API calls. Access answers are kept per identity
// (user, uid, groups, extra), namespace and verb: every token of one ServiceAccount shares them.
// Tokens are kept only as SHA-256 digests and never logged.
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { DELIVERY, GROUP } from "../api/names.js";
import type { KubeClient } from "../kube/client.js";
import { collectionPath, CORE } from "../kube/types.js";

/** The audience callers' tokens are issued for unless PUBLISH_TOKEN_AUDIENCES says otherwise. */
export const DEFAULT_AUDIENCE = "hookline";

export interface Caller {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/**
 * Why a token was not accepted, for the log and the metric label only: the caller is told
 * none of it (an attacker learns nothing from the answer).
 */
export type AuthFailure = "invalid_token" | "wrong_audience";

export type Authentication = { ok: true; caller: Caller } | { ok: false; failure: AuthFailure; reason: string };
export type Authorization = { allowed: true } | { allowed: false; reason: string };

/** A time-bounded, size-bounded map of promises; failed promises are forgotten at once. */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: Promise<V>; expires: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly max: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Whether an answer for `key` is held (pending or settled) and not expired. */
  has(key: string): boolean {
    const hit = this.entries.get(key);
    return hit !== undefined && hit.expires > this.now();
  }

  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.expires > now) return hit.value;
    if (hit) this.entries.delete(key);
    const value = load();
    this.entries.set(key, { value, expires: now + this.ttlMs });
    value.catch(() => {
      if (this.entries.get(key)?.value === value) this.entries.delete(key);
    });
    // Over the bound: drop the oldest (a Map iterates in insertion order).
    for (const k of this.entries.keys()) {
      if (this.entries.size <= this.max) break;
      this.entries.delete(k);
    }
    return value;
  }
}

export interface ReviewerOptions {
  /**
   * Audiences a token must be issued for (TokenReview spec.audiences); default ["hookline"].
   * A token for another audience (the API server's own, say) is not accepted. "api-server": the
   * API server's own audiences (no spec.audiences), for the metrics server, whose scrapers
   * (Prometheus) send their ServiceAccount's token as it is.
   */
  audiences?: readonly string[] | "api-server";
  /** How long an answer is reused; default 10 s. */
  ttlMs?: number;
  /** Answers kept at most (per kind); default 10 000. */
  maxEntries?: number;
  now?: () => number;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  audiences?: string[];
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  error?: string;
}

interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
}

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

export function tokenDigest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Everything a SubjectAccessReview is asked about the caller, as one key: equal keys get equal answers. */
export function identityKey(caller: Caller): string {
  return createHash("sha256").update(JSON.stringify([caller.username, caller.uid ?? "", caller.groups, caller.extra ?? {}])).digest("hex");
}

/** The verbs the door asks about: `create` to publish, `get` to be told how an existing delivery differs. */
export type AccessVerb = "create" | "get";

export class Reviewer {
  private readonly tokens: TtlCache<Authentication>;
  private readonly access: TtlCache<Authorization>;
  private readonly audiences: readonly string[] | undefined;

  constructor(
    private readonly client: KubeClient,
    opts: ReviewerOptions = {},
  ) {
    const ttl = opts.ttlMs ?? 10_000;
    const max = opts.maxEntries ?? 10_000;
    this.tokens = new TtlCache(ttl, max, opts.now);
    this.access = new TtlCache(ttl, max, opts.now);
    this.audiences = opts.audiences === "api-server" ? undefined : opts.audiences?.length ? [...opts.audiences] : [DEFAULT_AUDIENCE];
  }

  /** Whether this token's review is held (pending or answered): asking again costs no API call. */
  knows(token: string): boolean {
    return this.tokens.has(tokenDigest(token));
  }

  /**
   * TokenReview of a bearer token for the door's audiences. Throws only when the API server
   * cannot answer.
   */
  authenticate(token: string): Promise<Authentication> {
    return this.tokens.get(tokenDigest(token), async () => {
      const review = await this.client.request<{ status?: TokenReviewStatus }>({
        method: "POST",
        path: collectionPath(CORE.tokenReviews),
        body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token, ...(this.audiences ? { audiences: [...this.audiences] } : {}) } },
      });
      const s = review.status ?? {};
      if (!s.authenticated || !s.user?.username) {
        // The API server's words (no token in them) say whether the audience was the problem.
        const failure: AuthFailure = /audience/i.test(s.error ?? "") ? "wrong_audience" : "invalid_token";
        return { ok: false, failure, reason: s.error ? s.error.slice(0, 512) : "not authenticated" };
      }
      // An authenticator that ignores audiences answers without status.audiences: such a token is
      // valid for the API server, not for this door (the TokenReview API asks clients to check).
      const audiences = this.audiences;
      if (audiences && !(s.audiences ?? []).some((a) => audiences.includes(a))) {
        return { ok: false, failure: "wrong_audience", reason: `authenticated for audiences ${JSON.stringify(s.audiences ?? [])}, none of ${JSON.stringify(audiences)}` };
      }
      return { ok: true, caller: { username: s.user.username, ...(s.user.uid ? { uid: s.user.uid } : {}), groups: s.user.groups ?? [], ...(s.user.extra ? { extra: s.user.extra } : {}) } };
    });
  }

  /** Whether the answer for (caller, namespace, verb) is held: asking again costs no API call. */
  knowsAccess(caller: Caller, namespace: string, verb: AccessVerb = "create"): boolean {
    return this.access.has(accessKey(caller, namespace, verb));
  }

  /** SubjectAccessReview: may `caller` `verb` webhookdeliveries in `namespace`? */
  authorize(caller: Caller, namespace: string, verb: AccessVerb = "create"): Promise<Authorization> {
    return this.access.get(accessKey(caller, namespace, verb), () =>
      this.review(caller, { resourceAttributes: { namespace, verb, group: GROUP, resource: DELIVERY.plural } }, `${verb} ${DELIVERY.plural}.${GROUP} in namespace "${namespace}"`),
    );
  }

  /** SubjectAccessReview: may `caller` `get` the non-resource URL `path` (e.g. /metrics)? */
  mayGetUrl(caller: Caller, path: string): Promise<Authorization> {
    return this.access.get(`${identityKey(caller)}/url/${path}`, () => this.review(caller, { nonResourceAttributes: { path, verb: "get" } }, `get ${path}`));
  }

  /** One SubjectAccessReview of `caller` for `attributes`; `what` names them in a refusal. */
  private async review(caller: Caller, attributes: Record<string, unknown>, what: string): Promise<Authorization> {
    const review = await this.client.request<{ status?: SubjectAccessReviewStatus }>({
      method: "POST",
      path: collectionPath(CORE.subjectAccessReviews),
      body: {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: caller.username,
          ...(caller.uid ? { uid: caller.uid } : {}),
          groups: caller.groups,
          ...(caller.extra ? { extra: caller.extra } : {}),
          ...attributes,
        },
      },
    });
    const s = review.status ?? {};
    if (s.allowed && !s.denied) return { allowed: true };
    return { allowed: false, reason: `${caller.username} may not ${what}${s.reason ? ` (${s.reason})` : ""}` };
  }
}

const accessKey = (caller: Caller, namespace: string, verb: AccessVerb) => `${identityKey(caller)}/${namespace}/${verb}`;
