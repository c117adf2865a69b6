// Whether the operator's NATS connection is authenticated, and what it says when it is not. Pure.
//
// Stream mode carries every tenant's events and the operator signs whatever arrives on a
// namespace's subject with that namespace's Secret, so a NATS that lets anyone in hands every
// tenant to anyone who can reach it. "Unauthenticated" is one of two things:
//   1. the operator presents no credentials: no user and password or token in HOOKLINE_NATS_URL,
//      no HOOKLINE_NATS_USER with HOOKLINE_NATS_PASSWORD_FILE, no TLS client certificate
//      (HOOKLINE_NATS_TLS_CERT_FILE). Known from the configuration, before connecting.
//   2. the server does not ask for any: its INFO says neither auth_required (users, tokens,
//      nkeys, accounts) nor tls_verify (a verified client certificate). A server without
//      authentication accepts whatever credentials a client sends, so (1) alone proves nothing.
// Either way stream mode stays off (the operator is not ready; CR mode runs) unless
// HOOKLINE_NATS_ALLOW_INSECURE=true, meant for a throwaway server on one's own machine.
import type { NatsServers } from "./url.js";

/** How the operator authenticates besides HOOKLINE_NATS_URL's own credentials (config/config.ts). */
export interface NatsClientAuth {
  /** HOOKLINE_NATS_USER with HOOKLINE_NATS_PASSWORD_FILE. */
  credentials?: { user: string; passwordFile: string };
  /** HOOKLINE_NATS_TLS_CA_FILE, _CERT_FILE, _KEY_FILE. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

const WHAT_TO_DO =
  "Run NATS with accounts and users (docs/stream-mode.md, \"NATS with authentication\") and give the operator its user: " +
  "nats://USER:PASSWORD@HOST:4222 in HOOKLINE_NATS_URL, or HOOKLINE_NATS_USER with HOOKLINE_NATS_PASSWORD_FILE (chart: stream.natsCredentialsSecret), " +
  "or a TLS client certificate the server verifies (HOOKLINE_NATS_TLS_CERT_FILE and _KEY_FILE). " +
  "HOOKLINE_NATS_ALLOW_INSECURE=true accepts an open NATS: only for a throwaway server on your own machine";

const WHY = "anyone who can reach it could publish events into any namespace (delivered, signed with that namespace's Secret), read every tenant's events and acknowledge or drop them";

/** The credentials the operator presents, by where they come from; empty: none. */
export function presentedCredentials(url: NatsServers, auth: NatsClientAuth): string[] {
  const out: string[] = [];
  if (url.user !== undefined && url.pass !== undefined) out.push("user and password in HOOKLINE_NATS_URL");
  if (url.token !== undefined) out.push("token in HOOKLINE_NATS_URL");
  if (auth.credentials) out.push("HOOKLINE_NATS_USER and HOOKLINE_NATS_PASSWORD_FILE");
  if (auth.tls?.certFile) out.push("TLS client certificate (HOOKLINE_NATS_TLS_CERT_FILE)");
  return out;
}

/** Why stream mode stays off before connecting (1), or undefined. */
export function noCredentialsProblem(where: string, url: NatsServers, auth: NatsClientAuth, allowInsecure: boolean): string | undefined {
  if (allowInsecure || presentedCredentials(url, auth).length > 0) return undefined;
  return `stream mode is off: HOOKLINE_NATS_URL=${where} gives the operator no NATS credentials, and a NATS that needs none lets in anyone: ${WHY}. ${WHAT_TO_DO}`;
}

/** Why stream mode stays off once connected (2), or undefined. */
export function openServerProblem(where: string, serverAuthenticates: boolean, allowInsecure: boolean): string | undefined {
  if (allowInsecure || serverAuthenticates) return undefined;
  return `stream mode is off: NATS at ${where} (HOOKLINE_NATS_URL) does not require authentication, so ${WHY}. ${WHAT_TO_DO}`;
}
