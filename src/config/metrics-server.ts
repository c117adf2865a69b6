// The metrics server's variables: whether /metrics asks who is scraping (METRICS_AUTH) and the
// certificate it then serves HTTPS with (METRICS_TLS_CERT_FILE, METRICS_TLS_KEY_FILE).

type Env = Record<string, string | undefined>;

export const METRICS_AUTH_MODES = ["none", "kubernetes"] as const;
export type MetricsAuthMode = (typeof METRICS_AUTH_MODES)[number];

export interface MetricsServerConfig {
  /**
   * none: anyone who reaches the port reads /metrics. kubernetes: a bearer token, checked with a
   * TokenReview, of a user the API server allows `get` on the non-resource URL /metrics
   * (SubjectAccessReview), as controller-runtime's secure metrics do.
   */
  auth: MetricsAuthMode;
  /** The certificate /metrics is served over HTTPS with; undefined: plain HTTP. */
  tls: { certFile: string; keyFile: string } | undefined;
}

export function loadMetricsServer(env: Env, problems: string[]): MetricsServerConfig {
  const authRaw = env.METRICS_AUTH?.trim() || "none";
  const auth = (METRICS_AUTH_MODES as readonly string[]).includes(authRaw) ? (authRaw as MetricsAuthMode) : undefined;
  if (!auth) problems.push(`METRICS_AUTH=${JSON.stringify(authRaw.slice(0, 100))} is invalid: must be one of ${METRICS_AUTH_MODES.join(", ")}`);
  const certFile = env.METRICS_TLS_CERT_FILE?.trim() || undefined;
  const keyFile = env.METRICS_TLS_KEY_FILE?.trim() || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    problems.push(`${certFile ? "METRICS_TLS_KEY_FILE" : "METRICS_TLS_CERT_FILE"} is missing: METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE go together (tls.crt and tls.key of a kubernetes.io/tls Secret)`);
  }
  const tls = certFile && keyFile ? { certFile, keyFile } : undefined;
  // A scraper's token is a credential: it never crosses the network in clear.
  if (auth === "kubernetes" && !tls && certFile === undefined && keyFile === undefined) {
    problems.push("METRICS_AUTH=kubernetes needs METRICS_TLS_CERT_FILE and METRICS_TLS_KEY_FILE: scrapers send a bearer token, which must not cross the network in clear");
  }
  return { auth: auth ?? "none", tls };
}
