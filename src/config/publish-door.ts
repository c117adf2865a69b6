// The HTTP publish door's variables (docs/publishing.md): its port, the token audiences it
// accepts, its TLS certificate files and its limit on failed authentications.

type Env = Record<string, string | undefined>;

export interface PublishDoorConfig {
  /** PUBLISH_PORT; undefined: the door is off. */
  port: number | undefined;
  /**
   * PUBLISH_TOKEN_AUDIENCES: a caller's token must be issued for one of these (TokenReview
   * spec.audiences), so callers send a token projected for Hookline, not their API credential.
   */
  audiences: string[];
  /** PUBLISH_TLS_CERT_FILE and PUBLISH_TLS_KEY_FILE (a mounted kubernetes.io/tls Secret); undefined: plain HTTP. */
  tls: { certFile: string; keyFile: string } | undefined;
  /** Failed authentications per client address: a token bucket of `burst`, refilled at `perMinute`. */
  authFailures: { burst: number; perMinute: number };
}

export const PUBLISH_VARS = {
  authFailureBurst: { name: "PUBLISH_AUTH_FAILURE_BURST", default: 10, min: 1, max: 100_000 },
  authFailurePerMinute: { name: "PUBLISH_AUTH_FAILURE_PER_MINUTE", default: 10, min: 1, max: 600_000 },
} as const;

export const DEFAULT_AUDIENCE = "hookline";
const AUDIENCE = /^[\x21-\x7e]{1,256}$/;

export function loadPublishDoor(env: Env, problems: string[], int: (v: { name: string; default: number; min: number; max: number }) => number): PublishDoorConfig {
  let port: number | undefined;
  const portRaw = env.PUBLISH_PORT?.trim();
  if (portRaw) {
    if (/^\d+$/.test(portRaw) && Number(portRaw) <= 65_535) port = Number(portRaw);
    else problems.push(`PUBLISH_PORT=${JSON.stringify(portRaw)} is invalid: must be an integer from 0 to 65535 (empty: the publish endpoint is off)`);
  }

  const audiencesRaw = env.PUBLISH_TOKEN_AUDIENCES?.trim() || DEFAULT_AUDIENCE;
  const audiences = [...new Set(audiencesRaw.split(",").map((a) => a.trim()).filter(Boolean))];
  const badAudience = audiences.find((a) => !AUDIENCE.test(a));
  if (badAudience !== undefined || audiences.length === 0) {
    problems.push(`PUBLISH_TOKEN_AUDIENCES=${JSON.stringify(audiencesRaw)} is invalid: a comma-separated list of audiences (1 to 256 visible ASCII characters each; default ${DEFAULT_AUDIENCE})`);
  }

  const certFile = env.PUBLISH_TLS_CERT_FILE?.trim() || undefined;
  const keyFile = env.PUBLISH_TLS_KEY_FILE?.trim() || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    problems.push(`${certFile ? "PUBLISH_TLS_KEY_FILE" : "PUBLISH_TLS_CERT_FILE"} is missing: PUBLISH_TLS_CERT_FILE and PUBLISH_TLS_KEY_FILE go together (tls.crt and tls.key of a kubernetes.io/tls Secret)`);
  }

  return {
    port,
    audiences,
    tls: certFile && keyFile ? { certFile, keyFile } : undefined,
    authFailures: { burst: int(PUBLISH_VARS.authFailureBurst), perMinute: int(PUBLISH_VARS.authFailurePerMinute) },
  };
}
