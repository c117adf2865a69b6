// Turns a subscription's policy into what one attempt needs besides its body and signature:
// header values from Secrets (spec.headersFrom), the TLS identity (spec.tls: client
// certificate, private CA), the proxy (spec.proxy) and OAuth2 client credentials
// (spec.oauth2). Every rule about them lives here, so the attempt path makes two calls:
// `resolve()` before planning (a Secret or key that is missing or unusable makes the delivery
// wait, like a missing signing Secret) and `send()` for the request (OAuth2 token, one refresh
// and one re-send on a 401). Messages name the field and the Secret, never a value.
import { createHash, createPrivateKey, X509Certificate } from "node:crypto";
import { MAX_HEADER_VALUE_LENGTH } from "../../api/subscription.js";
import type { SecretView } from "../../core/attempt/plan.js";
import { secretRefMissing, type Policy, type SecretKeyRef } from "../../core/attempt/policy.js";
import type { OAuth2Client, OAuth2Grant } from "./oauth2.js";
import type { SecretCache } from "./secrets.js";
import type { Sender, SendRequest, SendResult, TlsIdentity } from "./sender.js";

export type ResolvedCredentials =
  | {
      kind: "ok";
      /** Header values from Secrets, by the names the spec gives. */
      headers: Record<string, string>;
      tls?: TlsIdentity;
      proxyUrl?: string;
      oauth2?: OAuth2Grant;
    }
  | {
      kind: "missing";
      /** Starts with the field, e.g. `spec.headersFrom[0].secretKeyRef: Secret x has no key "y"`. */
      message: string;
      /** The spec field whose Secret is at fault, e.g. `spec.tls.clientCertificateSecretRef`. */
      field: string;
      /** SecretNotFound: the Secret or key does not exist (or cannot be read); SecretNotUsable: its value cannot be used. */
      reason: "SecretNotFound" | "SecretNotUsable";
    };

/** The code of an attempt that could not be made because its credentials went missing. */
export const CREDENTIALS_MISSING_CODE = "HOOKLINE_CREDENTIALS_MISSING";

/** Header values: tab and printable ASCII, as in spec.headers. */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
/** OAuth2 client id and secret: VSCHAR (RFC 6749 appendix A). */
const VSCHAR = /^[\x20-\x7e]+$/;

type Missing = Extract<ResolvedCredentials, { kind: "missing" }>;
const missing = (field: string, reason: Missing["reason"], why: string): Missing => ({ kind: "missing", field, reason, message: `${field}: ${why}` });

export class Credentials {
  /** Parsed TLS material by its hash: a certificate is checked once, not on every attempt. */
  private readonly checkedTls = new Map<string, string | undefined>();

  constructor(
    private readonly secrets: SecretCache,
    private readonly sender: Sender,
    private readonly oauth2: OAuth2Client,
  ) {}

  /** Everything the policy's credentials need, read from Secrets in `namespace`. */
  async resolve(namespace: string, policy: Policy): Promise<ResolvedCredentials> {
    const headers: Record<string, string> = {};
    for (const [i, h] of policy.headersFrom.entries()) {
      const field = `spec.headersFrom[${i}].secretKeyRef`;
      const v = await this.value(namespace, h.secretKeyRef, field);
      if (typeof v !== "string") return v;
      const problem = headerValueProblem(v);
      if (problem) return missing(field, "SecretNotUsable", `Secret ${h.secretKeyRef.name} key "${h.secretKeyRef.key}" ${problem}`);
      headers[h.name] = v;
    }
    const out: Extract<ResolvedCredentials, { kind: "ok" }> = { kind: "ok", headers };
    if (policy.tls) {
      const tls = await this.tls(namespace, policy.tls);
      if ("kind" in tls) return tls;
      out.tls = tls;
    }
    if (policy.proxyUrl) out.proxyUrl = policy.proxyUrl;
    if (policy.oauth2) {
      const o = policy.oauth2;
      const id = await this.value(namespace, o.clientIdSecretRef, "spec.oauth2.clientIdSecretRef");
      if (typeof id !== "string") return id;
      const secret = await this.value(namespace, o.clientSecretSecretRef, "spec.oauth2.clientSecretSecretRef");
      if (typeof secret !== "string") return secret;
      for (const [field, ref, v] of [["spec.oauth2.clientIdSecretRef", o.clientIdSecretRef, id], ["spec.oauth2.clientSecretSecretRef", o.clientSecretSecretRef, secret]] as const) {
        if (!VSCHAR.test(v)) return missing(field, "SecretNotUsable", `Secret ${ref.name} key "${ref.key}" ${asciiProblem(v, "OAuth2 client credentials are printable ASCII (RFC 6749)")}`);
      }
      out.oauth2 = {
        key: hash(namespace, o.tokenURL, id, secret, o.scopes.join(" "), o.audience ?? "", o.clientAuthentication, policy.proxyUrl ?? ""),
        namespace,
        tokenURL: o.tokenURL,
        clientId: id,
        clientSecret: secret,
        scopes: o.scopes,
        ...(o.audience !== undefined ? { audience: o.audience } : {}),
        clientAuthentication: o.clientAuthentication,
        ...(policy.proxyUrl ? { proxyUrl: policy.proxyUrl } : {}),
      };
    }
    return out;
  }

  /** For a delivery due now: resolve(), or undefined without a policy or while it is paused (nothing is sent). */
  async resolveDue(namespace: string, policy: Policy | undefined): Promise<ResolvedCredentials | undefined> {
    return policy && !policy.paused ? this.resolve(namespace, policy) : undefined;
  }

  /** Sends one attempt with these credentials (see sendWithCredentials). */
  send(creds: ResolvedCredentials | undefined, req: SendRequest): Promise<SendResult> {
    return sendWithCredentials(this.sender, this.oauth2, creds, req);
  }

  private async value(namespace: string, ref: SecretKeyRef, field: string): Promise<string | Missing> {
    const read = await this.secrets.read(namespace, ref.name, [ref.key]);
    if (read.kind === "missing") return missing(field, "SecretNotFound", read.message);
    const v = read.data[ref.key];
    if (v === undefined) return missing(field, "SecretNotFound", `Secret ${ref.name} has no key "${ref.key}"`);
    if (v === "") return missing(field, "SecretNotUsable", `Secret ${ref.name} key "${ref.key}" is empty`);
    return v;
  }

  private async tls(namespace: string, t: NonNullable<Policy["tls"]>): Promise<TlsIdentity | Missing> {
    const identity: { cert?: string; key?: string; ca?: string } = {};
    if (t.clientCertificateSecretRef) {
      const field = "spec.tls.clientCertificateSecretRef";
      const name = t.clientCertificateSecretRef.name;
      const read = await this.secrets.read(namespace, name, ["tls.crt", "tls.key"]);
      if (read.kind === "missing") return missing(field, "SecretNotFound", read.message);
      for (const k of ["tls.crt", "tls.key"]) {
        if (!read.data[k]) return missing(field, "SecretNotFound", `Secret ${name} has no key "${k}" (a kubernetes.io/tls Secret has tls.crt and tls.key)`);
      }
      identity.cert = read.data["tls.crt"]!;
      identity.key = read.data["tls.key"]!;
      const problem = this.checked(identity.cert, identity.key, undefined);
      if (problem) return missing(field, "SecretNotUsable", `Secret ${name} ${problem}`);
    }
    if (t.caBundleSecretRef) {
      const field = "spec.tls.caBundleSecretRef";
      const ref = t.caBundleSecretRef;
      const ca = await this.value(namespace, ref, field);
      if (typeof ca !== "string") return ca;
      const problem = this.checked(undefined, undefined, ca);
      if (problem) return missing(field, "SecretNotUsable", `Secret ${ref.name} key "${ref.key}" ${problem}`);
      identity.ca = ca;
    }
    return { ...identity, id: hash(identity.cert ?? "", identity.key ?? "", identity.ca ?? "") };
  }

  /** What is wrong with this TLS material, if anything (memoized by its hash). */
  private checked(cert: string | undefined, key: string | undefined, ca: string | undefined): string | undefined {
    const id = hash(cert ?? "", key ?? "", ca ?? "");
    if (this.checkedTls.has(id)) return this.checkedTls.get(id);
    const problem = cert !== undefined && key !== undefined ? clientCertificateProblem(cert, key) : ca !== undefined ? caBundleProblem(ca) : undefined;
    if (this.checkedTls.size >= 256) this.checkedTls.delete(this.checkedTls.keys().next().value!);
    this.checkedTls.set(id, problem);
    return problem;
  }
}

/** Why a subscription without secretRef sends nothing: unsigned requests are a choice to write down. */
export const SECRET_REQUIRED_MESSAGE =
  "spec.secretRef is not set and spec.signature.scheme is not None: requests are signed unless the subscription says signature: {scheme: None}; set secretRef to a Secret with the signing secret, or choose None to send unsigned requests";

/**
 * The signing keys and the receiver credentials (headersFrom, tls, oauth2, proxy) for plan()
 * and the executor, looked up only when an attempt may follow (`due`, not paused): a delivery
 * waiting for its backoff or a paused subscription costs no Secret read, and a missing one makes
 * the delivery wait. Both transports (the delivery reconciler, stream mode) call it.
 */
export async function secretsFor(
  d: { secrets: Pick<SecretCache, "keys">; credentials: Pick<Credentials, "resolveDue"> },
  namespace: string,
  policy: Policy | undefined,
  due: boolean,
): Promise<{ secret: SecretView; keys: Buffer[]; creds: ResolvedCredentials | undefined }> {
  const creds = await d.credentials.resolveDue(namespace, due ? policy : undefined);
  // Unsigned only by choice (scheme None): without secretRef, another scheme waits like a missing Secret.
  if (policy && secretRefMissing(policy) && due && !policy.paused) return { secret: { kind: "missing", message: SECRET_REQUIRED_MESSAGE }, keys: [], creds };
  if (!policy?.secretRef || !due || policy.paused) return { secret: withCredentials({ kind: "none" }, creds), keys: [], creds };
  const lookup = await d.secrets.keys(namespace, policy.secretRef);
  const secret: SecretView = lookup.kind === "ok" ? { kind: "ok" } : lookup;
  return { secret: withCredentials(secret, creds), keys: lookup.kind === "ok" ? lookup.keys : [], creds };
}

/** What plan() sees of the Secrets: missing credentials make the delivery wait like a missing signing Secret. */
export function withCredentials(secret: SecretView, creds: ResolvedCredentials | undefined): SecretView {
  return creds?.kind === "missing" && secret.kind !== "missing" ? creds : secret;
}

/**
 * Sends `req` with the credentials merged in: Secret headers, the TLS identity, the proxy, and
 * for OAuth2 `Authorization: Bearer <token>`. A 401 from the endpoint makes it fetch a new
 * token once and send the request once more, inside the same attempt (the second answer is the
 * attempt's outcome). Each request, the token requests too, has the attempt's timeout.
 */
export async function sendWithCredentials(sender: Sender, oauth2: OAuth2Client, creds: ResolvedCredentials | undefined, req: SendRequest): Promise<SendResult> {
  if (creds?.kind === "missing") return { kind: "error", code: CREDENTIALS_MISSING_CODE, message: creds.message, durationMs: 0 };
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const base: SendRequest = {
    ...req,
    // Hookline's own headers last: the schema keeps the names apart, this keeps them Hookline's.
    headers: { ...creds?.headers, ...req.headers },
    ...(creds?.tls ? { tls: creds.tls } : {}),
    ...(creds?.proxyUrl ? { proxyUrl: creds.proxyUrl } : {}),
  };
  if (!creds?.oauth2) return sender.send(base);
  const grant = creds.oauth2;
  const withToken = (token: string): SendRequest => ({ ...base, headers: { ...base.headers, authorization: `Bearer ${token}` } });
  const first = await oauth2.token(grant, { timeoutMs: req.timeoutMs, ...(req.signal ? { signal: req.signal } : {}) });
  if (first.kind === "error") return { ...first, durationMs: elapsed() };
  const sent = await sender.send(withToken(first.token));
  if (sent.kind !== "response" || sent.status !== 401) return { ...sent, durationMs: elapsed() };
  // The token may have been revoked or the endpoint's keys rotated: one new token, one re-send.
  const second = await oauth2.token(grant, { timeoutMs: req.timeoutMs, replacing: first.token, ...(req.signal ? { signal: req.signal } : {}) });
  if (second.kind === "error") return { ...second, durationMs: elapsed() };
  const again = await sender.send(withToken(second.token));
  return { ...again, durationMs: elapsed() };
}

/** Why a Secret's value cannot be a header value, or undefined. */
export function headerValueProblem(v: string): string | undefined {
  if (v.length > MAX_HEADER_VALUE_LENGTH) return `is ${v.length} characters long; a header value may have at most ${MAX_HEADER_VALUE_LENGTH}`;
  if (HEADER_VALUE.test(v)) return undefined;
  return asciiProblem(v, "HTTP header values are tab and printable ASCII");
}

function asciiProblem(v: string, rule: string): string {
  if (/[\r\n]$/.test(v) && !/[\r\n]/.test(v.replace(/[\r\n]+$/, ""))) {
    return `ends with a line break (${rule}; \`kubectl create secret --from-file\` keeps a file's last newline: write the file with printf or echo -n)`;
  }
  const bad = [...v].findIndex((c) => !/[\t\x20-\x7e]/.test(c));
  const cp = [...v][bad]!.codePointAt(0)!;
  const what = cp > 0x7e && cp !== 0x7f ? "a non-ASCII character" : cp === 0x0a || cp === 0x0d ? "a line break" : "a control character";
  return `has ${what} at position ${bad + 1} (${rule})`;
}

function clientCertificateProblem(cert: string, key: string): string | undefined {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    return 'key "tls.crt" is not a PEM certificate';
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    return 'key "tls.key" is not a PEM private key (an encrypted key cannot be used)';
  }
  if (!x509.checkPrivateKey(privateKey)) return 'key "tls.key" does not belong to the certificate in "tls.crt" (the first certificate must be the client certificate)';
  return undefined;
}

function caBundleProblem(ca: string): string | undefined {
  const blocks = ca.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return "holds no PEM certificate";
  for (const [i, b] of blocks.entries()) {
    try {
      new X509Certificate(b);
    } catch {
      return `certificate ${i + 1} does not parse`;
    }
  }
  return undefined;
}

function hash(...parts: string[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex");
}
