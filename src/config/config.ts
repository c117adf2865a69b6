// The operator's environment, parsed once at start. A bad value stops the process with a message
// naming the variable, the value and the allowed range. Nothing else in src/ reads process.env.
import { DEFAULT_PROVIDERS, MAX_PROVIDERS, parseProviders } from "../core/provider.js";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { parseDuration } from "../api/duration.js";
import { retrySchema } from "../api/subscription.js";
import { describeRetrySchedule, largestRetryDelayMs } from "../core/advice.js";
import { parseCidrList, type Cidr } from "../core/request/netguard.js";
import { NO_PROXY_NONE, parseNoProxy, parseProxyUrl, redactProxyUrl, type ProxyEnv } from "../core/request/proxy-env.js";
import { NatsUrlError, parseNatsUrl, redactNatsUrl } from "../jetstream/url.js";
import { DEFAULT_AUDIENCE, loadPublishDoor, PUBLISH_VARS, type PublishDoorConfig } from "./publish-door.js";
import { loadMetricsServer, METRICS_AUTH_MODES, type MetricsServerConfig } from "./metrics-server.js";
import { loadTracing, TRACING_ENV_DOCS, type TracingConfig, type TracingWarning } from "./tracing.js";

export type { PublishDoorConfig } from "./publish-door.js";
export type { TracingConfig } from "./tracing.js";

export interface Config {
  /** Per-attempt timeout when a subscription sets none. */
  deliveryTimeoutMs: number;
  breaker: { failureThreshold: number; successThreshold: number; cooldownMs: number };
  drain: { timeoutMs: number; action: "requeue" | "dead-letter" };
  /** Concurrent webhook requests across all endpoints. */
  maxInFlight: number;
  /**
   * Finished deliveries (Succeeded, Discarded, DeadLettered) kept across the cluster (or the
   * watched namespaces), shared fairly between namespaces; above it the oldest of the namespaces
   * over their share are deleted. See docs/capacity.md.
   */
  maxFinishedDeliveries: number;
  /**
   * Dead letters kept across the watched namespaces (WEBHOOK_DLQ_MAX_ENTRIES), beside each
   * subscription's deadLetter.maxEntries, shared fairly between namespaces; at the cap the oldest
   * of a namespace over its share is deleted before a new one is stored.
   */
  dlqMaxEntries: number;
  /** Non-public networks the operator may deliver to (loopback, private, link-local need it). */
  allowedNetworks: Cidr[];
  /** The raw value, for logs and docs. */
  allowedNetworksText: string;
  /**
   * Proxies for webhook requests and OAuth2 token requests (never for the API server):
   * HTTPS_PROXY, HTTP_PROXY, NO_PROXY (or their lowercase forms). A subscription's
   * spec.proxy.url wins over them.
   */
  proxy: ProxyEnv;
  /** The proxy settings without credentials, for logs. */
  proxyText: string;
  /** Namespaces to watch; empty means all. */
  watchNamespaces: string[];
  metricsPort: number;
  /** METRICS_AUTH and the certificate /metrics is served with (METRICS_TLS_CERT_FILE, METRICS_TLS_KEY_FILE). */
  metrics: MetricsServerConfig;
  healthPort: number;
  /** Port of the publish HTTP door; undefined when it is off. */
  publishPort: number | undefined;
  /** The publish door's token audiences, TLS files and failed-authentication limit. */
  publish: Omit<PublishDoorConfig, "port">;
  /**
   * Export of a CLIENT span per attempt and per replay (OTEL_EXPORTER_OTLP_ENDPOINT and the
   * other OpenTelemetry variables); undefined: off, and the OpenTelemetry SDK is not loaded.
   * `headers` may hold credentials: log headerNames and urlRedacted, never this.
   */
  tracing: TracingConfig | undefined;
  /** Advice about the tracing variables, logged at start with configWarnings. */
  tracingWarnings: TracingWarning[];
  /** How often a Disabled endpoint is probed. */
  healthProbeIntervalMs: number;
  /** How long a Secret read for a subscription is used before it is read again. */
  secretRefreshMs: number;
  leaderElection: { enabled: boolean; leaseName: string; leaseNamespace: string; identity: string; leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /**
   * HOOKLINE_NATS_URL: the NATS server(s) with JetStream for stream mode (one nats:// or tls://
   * URL, or a comma-separated list); undefined: stream mode off. May hold credentials: log
   * natsUrlRedacted, never this.
   */
  natsUrl: string | undefined;
  /** natsUrl with any password or token replaced by "***". */
  natsUrlRedacted: string | undefined;
  /** HOOKLINE_PAYLOAD_CACHE_BYTES: small payloads kept from the watch for their attempts (delivery/kept-payloads.ts); 0: none. */
  payloadCacheBytes: number;
  /** HOOKLINE_METRIC_PROVIDERS: the values the metrics' provider label may take (core/provider.ts); generic always. */
  metricProviders: string[];
  /** HOOKLINE_STREAM_REPLICAS: replicas of the streams and the key-value buckets on a NATS cluster. */
  streamReplicas: number;
  /** HOOKLINE_STREAM_MAX_HELD_BYTES: stream messages a replica holds in memory at most; JetStream keeps the rest. */
  streamMaxHeldBytes: number;
  /** HOOKLINE_STREAM_MAX_AGE_MS: an event not delivered by this age becomes a dead letter (Expired). */
  streamMaxAgeMs: number;
  /** HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES / _MAX_BYTES: what one namespace's stream holds at most; above, publishes are refused. */
  streamNamespaceMaxMessages: number;
  streamNamespaceMaxBytes: number;
  /**
   * Stream mode's authentication besides HOOKLINE_NATS_URL's credentials (HOOKLINE_NATS_USER,
   * HOOKLINE_NATS_PASSWORD_FILE, HOOKLINE_NATS_TLS_*), and HOOKLINE_NATS_ALLOW_INSECURE: whether
   * a NATS that lets anyone in is used anyway (jetstream/auth.ts).
   */
  natsAuth: NatsAuthConfig;
  /**
   * HOOKLINE_INSTALLATION: the name this installation claims its namespaces' streams and their
   * consumers with, so that two installations never take each other's (default <Lease
   * namespace>/<Lease name>).
   */
  installation: string;
}

/** Stream mode's credentials besides the URL's, and HOOKLINE_NATS_ALLOW_INSECURE (the shape jetstream/auth.ts NatsClientAuth reads). */
export interface NatsAuthConfig {
  /** HOOKLINE_NATS_USER with HOOKLINE_NATS_PASSWORD_FILE. */
  credentials?: { user: string; passwordFile: string };
  /** HOOKLINE_NATS_TLS_CA_FILE, _CERT_FILE, _KEY_FILE (those set). */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  allowInsecure: boolean;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

type Env = Record<string, string | undefined>;

interface IntVar {
  name: string;
  default: number;
  min: number;
  max: number;
}

/** The contract's variables and Hookline's own, with defaults and ranges. */
export const INT_VARS = {
  deliveryTimeoutMs: { name: "WEBHOOK_DELIVERY_TIMEOUT_MS", default: 10_000, min: 100, max: 120_000 },
  failureThreshold: { name: "WEBHOOK_CB_FAILURE_THRESHOLD", default: 5, min: 1, max: 100 },
  successThreshold: { name: "WEBHOOK_CB_SUCCESS_THRESHOLD", default: 1, min: 1, max: 20 },
  cooldownMs: { name: "WEBHOOK_CB_TIMEOUT_MS", default: 60_000, min: 1_000, max: 300_000 },
  drainTimeoutMs: { name: "WEBHOOK_DRAIN_TIMEOUT_MS", default: 25_000, min: 0, max: 3_600_000 },
  maxInFlight: { name: "WEBHOOK_MAX_IN_FLIGHT", default: 100, min: 1, max: 10_000 },
  metricsPort: { name: "METRICS_PORT", default: 8080, min: 0, max: 65_535 },
  healthPort: { name: "HEALTH_PORT", default: 8081, min: 0, max: 65_535 },
  healthProbeIntervalMs: { name: "WEBHOOK_HEALTH_PROBE_INTERVAL_MS", default: 1_800_000, min: 1_000, max: 86_400_000 },
  leaseDurationMs: { name: "LEADER_ELECTION_LEASE_DURATION_MS", default: 15_000, min: 1_000, max: 300_000 },
  renewDeadlineMs: { name: "LEADER_ELECTION_RENEW_DEADLINE_MS", default: 10_000, min: 500, max: 300_000 },
  retryPeriodMs: { name: "LEADER_ELECTION_RETRY_PERIOD_MS", default: 2_000, min: 100, max: 60_000 },
  // 20,000 finished deliveries of 1 KiB take ~82 MB of etcd, of 16 KiB ~370 MB (docs/capacity.md).
  maxFinishedDeliveries: { name: "WEBHOOK_MAX_FINISHED_DELIVERIES", default: 20_000, min: 10, max: 10_000_000 },
  // The DLQ specification's capacity: oldest evicted before the new one is stored.
  dlqMaxEntries: { name: "WEBHOOK_DLQ_MAX_ENTRIES", default: 10_000, min: 1, max: 10_000_000 },
  // Payloads of pending deliveries kept in memory so that an attempt need not read them back: a
  // bounded budget shared fairly between namespaces (delivery/kept-payloads.ts).
  payloadCacheBytes: { name: "HOOKLINE_PAYLOAD_CACHE_BYTES", default: 32 * 1024 * 1024, min: 0, max: 4 * 1024 * 1024 * 1024 },
  streamReplicas: { name: "HOOKLINE_STREAM_REPLICAS", default: 1, min: 1, max: 5 },
  // Stream mode's bounds (docs/stream-mode.md#limits): memory per replica, age and size per
  // namespace; the last three are jetstream/layout.ts DEFAULT_LAYOUT's (layout.test.ts checks).
  streamMaxHeldBytes: { name: "HOOKLINE_STREAM_MAX_HELD_BYTES", default: 32 * 1024 * 1024, min: 1024 * 1024, max: 16 * 1024 * 1024 * 1024 },
  streamMaxAgeMs: { name: "HOOKLINE_STREAM_MAX_AGE_MS", default: 7 * 86_400_000, min: 1_000, max: 14 * 86_400_000 },
  streamNamespaceMaxMessages: { name: "HOOKLINE_STREAM_NAMESPACE_MAX_MESSAGES", default: 1_000_000, min: 1, max: 1_000_000_000 },
  streamNamespaceMaxBytes: { name: "HOOKLINE_STREAM_NAMESPACE_MAX_BYTES", default: 256 * 1024 * 1024, min: 1024 * 1024, max: 1024 * 1024 * 1024 * 1024 },
  // How stale a Secret's value may be: a rotated key or renewed certificate is used within it.
  secretRefreshMs: { name: "WEBHOOK_SECRET_REFRESH_MS", default: 30_000, min: 1_000, max: 600_000 },
} as const satisfies Record<string, IntVar>;

/** Every variable the operator reads, for docs/api.md: default, range and what it does. */
export const ENV_DOCS: Array<{ name: string; default: string; range: string; what: string }> = [
  ...(
    [
      [INT_VARS.deliveryTimeoutMs, "per-attempt timeout when a subscription sets no `timeout`"],
      [INT_VARS.failureThreshold, "consecutive failures that open a breaker (subscription default)"],
      [INT_VARS.successThreshold, "successful probes in HalfOpen that close it (subscription default)"],
      [INT_VARS.cooldownMs, "how long a breaker stays Open before one probe (subscription default); shorter than the default retry policy's largest delay (17600): a warning at start"],
      [INT_VARS.drainTimeoutMs, "on SIGTERM, how long in-flight requests may finish"],
    ] as const
  ).map(([v, what]) => ({ name: v.name, default: String(v.default), range: `${v.min}..${v.max}`, what })),
  { name: "WEBHOOK_DRAIN_TIMEOUT_ACTION", default: "requeue", range: "requeue, dead-letter", what: "what an attempt cut by the drain timeout becomes" },
  { name: INT_VARS.maxInFlight.name, default: String(INT_VARS.maxInFlight.default), range: `${INT_VARS.maxInFlight.min}..${INT_VARS.maxInFlight.max}`, what: "webhook requests in flight across all endpoints, shared fairly between namespaces" },
  { name: "WEBHOOK_ALLOWED_NETWORKS", default: "empty: public addresses only", range: "comma-separated CIDR list", what: "non-public networks the operator may deliver to (loopback, private and link-local need it); plain http only to these" },
  { name: "HTTPS_PROXY", default: "empty: none", range: "http:// or https:// URL (https_proxy also read)", what: "HTTP CONNECT proxy for https:// webhook and OAuth2 token requests (not the API server); a subscription's spec.proxy.url wins" },
  { name: "HTTP_PROXY", default: "empty: none", range: "http:// or https:// URL (http_proxy also read)", what: "the same for http:// requests" },
  { name: "NO_PROXY", default: "empty", range: "comma list of domains, IPs, CIDRs, `*` (no_proxy also read)", what: "destinations reached directly despite HTTPS_PROXY/HTTP_PROXY, as Go and curl read it; localhost and loopback always are" },
  { name: "WATCH_NAMESPACES", default: "empty: all", range: "comma-separated namespace list", what: "namespaces to serve" },
  {
    name: "HOOKLINE_METRIC_PROVIDERS",
    default: DEFAULT_PROVIDERS.join(","),
    range: `comma list of up to ${MAX_PROVIDERS} tokens (a-z, 0-9, _, -; 1-32 characters)`,
    what: "the values the provider label of webhook_delivery_attempts_total and webhook_breaker_state may take: a subscription's hookline.dev/provider label when listed, else generic (always allowed)",
  },
  ...(
    [
      [INT_VARS.metricsPort, "`/metrics` (0: any free port)"],
      [INT_VARS.healthPort, "`/healthz`, `/readyz` (0: any free port)"],
      [INT_VARS.healthProbeIntervalMs, "how often a Disabled endpoint is probed"],
      [INT_VARS.secretRefreshMs, "how long a Secret's value is used before it is read again: a rotated signing key, header value, client secret or renewed client certificate is picked up within this time, without a restart"],
      [INT_VARS.maxFinishedDeliveries, "finished deliveries kept in the cluster's etcd (all namespaces), shared fairly between the namespaces (max-min fair shares); above it the oldest of the namespaces over their share are deleted, Succeeded before Discarded before DeadLettered (docs/capacity.md)"],
      [INT_VARS.dlqMaxEntries, "dead letters kept across the watched namespaces, shared fairly between them, beside each subscription's deadLetter.maxEntries; at the cap the oldest dead letter of a namespace over its share is deleted (Event DeadLetterDropped, drop_overflow) before a new one is stored"],
    ] as const
  ).map(([v, what]) => ({ name: v.name, default: String(v.default), range: `${v.min}..${v.max}`, what })),
  { name: "METRICS_AUTH", default: "none", range: METRICS_AUTH_MODES.join(", "), what: "kubernetes: `/metrics` answers only a bearer token (TokenReview) of a user allowed `get` on the non-resource URL `/metrics` (SubjectAccessReview; the chart's `<release>-metrics-reader` ClusterRole), over HTTPS (needs METRICS_TLS_CERT_FILE); 401 without a valid token, 403 without the right. The chart sets it" },
  { name: "METRICS_TLS_CERT_FILE", default: "empty: plain HTTP", range: "file path (with METRICS_TLS_KEY_FILE)", what: "`/metrics` is served over HTTPS with this certificate (tls.crt of a mounted kubernetes.io/tls Secret); a renewed certificate is picked up without a restart" },
  { name: "METRICS_TLS_KEY_FILE", default: "empty: plain HTTP", range: "file path (with METRICS_TLS_CERT_FILE)", what: "its private key (tls.key)" },
  { name: "PUBLISH_PORT", default: "empty: off", range: "0..65535", what: "the HTTP publish endpoint" },
  { name: "PUBLISH_TOKEN_AUDIENCES", default: DEFAULT_AUDIENCE, range: "comma-separated audiences", what: "the publish door accepts only bearer tokens issued for one of these (TokenReview audiences): callers send a token projected for Hookline (`kubectl create token SA --audience hookline`), not their API credential" },
  { name: "PUBLISH_TLS_CERT_FILE", default: "empty: plain HTTP", range: "file path (with PUBLISH_TLS_KEY_FILE)", what: "the publish door serves HTTPS with this certificate (tls.crt of a mounted kubernetes.io/tls Secret); a renewed certificate is picked up without a restart" },
  { name: "PUBLISH_TLS_KEY_FILE", default: "empty: plain HTTP", range: "file path (with PUBLISH_TLS_CERT_FILE)", what: "its private key (tls.key)" },
  ...(
    [
      [PUBLISH_VARS.authFailureBurst, "failed authentications a client address may make at the publish door before it gets 429 (a token bucket's size)"],
      [PUBLISH_VARS.authFailurePerMinute, "how fast that allowance refills, per minute"],
    ] as const
  ).map(([v, what]) => ({ name: v.name, default: String(v.default), range: `${v.min}..${v.max}`, what })),
  { name: "LEADER_ELECT", default: "true", range: "true, false", what: "leader election on a Lease" },
  { name: "LEADER_ELECTION_LEASE_NAME", default: "hookline-leader", range: "RFC 1123 name", what: "the Lease" },
  { name: "LEADER_ELECTION_NAMESPACE", default: "POD_NAMESPACE, else default", range: "RFC 1123 name", what: "where the Lease lives" },
  ...(
    [
      [INT_VARS.leaseDurationMs, "Lease duration"],
      [INT_VARS.renewDeadlineMs, "must be below the lease duration"],
      [INT_VARS.retryPeriodMs, "must be below the renew deadline"],
      [INT_VARS.payloadCacheBytes, "payloads of pending deliveries (each of at most 64 KiB serialized) kept in memory from the watch, so that an attempt need not read its delivery back from the API server; shared between namespaces (when full, the namespace holding the most loses its oldest); 0 keeps none and every attempt reads its payload"],
    ] as const
  ).map(([v, what]) => ({ name: v.name, default: String(v.default), range: `${v.min}..${v.max}`, what })),
  { name: "POD_NAME", default: "host name + random suffix", range: "", what: "identity in the Lease and in Events" },
  { name: "POD_NAMESPACE", default: "", range: "", what: "from the downward API in the chart" },
  { name: "LOG_LEVEL", default: "info", range: "fatal, error, warn, info, debug, trace, silent", what: "pino level" },
  { name: "HOOKLINE_NATS_URL", default: "empty: stream mode off", range: "nats:// or tls:// URL, or a comma-separated list", what: "stream mode: the NATS server(s) with JetStream (credentials as nats://USER:PASSWORD@HOST or nats://TOKEN@HOST); see docs/stream-mode.md" },
  ...(
    [
      [INT_VARS.streamReplicas, "stream mode: replicas of the namespaces' streams (HOOKLINE_<namespace>) and the key-value buckets on a NATS cluster (3 in production); the operator keeps the streams at this"],
      [INT_VARS.streamMaxHeldBytes, "stream mode: bytes of stream messages one replica holds in memory (fetched and not answered yet, attempts in flight included), each counted twice (its bytes and its request body), shared fairly between namespaces and their subscriptions; above it the replica fetches nothing more and JetStream keeps the messages"],
      [INT_VARS.streamMaxAgeMs, "stream mode: an event not delivered this long after it was stored becomes a dead letter (reason Expired), held subscriptions (paused, Secret missing, breaker open) included; each namespace's stream drops messages at twice this age (at least a day more) as a backstop"],
      [INT_VARS.streamNamespaceMaxMessages, "stream mode: events one namespace's stream holds at most (not yet delivered to every subscription); above it JetStream refuses the namespace's publishes (HTTP 429, StreamQuotaExceededError) while other namespaces publish normally"],
      [INT_VARS.streamNamespaceMaxBytes, "stream mode: bytes one namespace's stream holds at most, the same way"],
    ] as const
  ).map(([v, what]) => ({ name: v.name, default: String(v.default), range: `${v.min}..${v.max}`, what })),
  { name: "HOOKLINE_NATS_USER", default: "empty", range: "a NATS user name (with HOOKLINE_NATS_PASSWORD_FILE)", what: "stream mode: the operator's NATS user, when its credentials are not in HOOKLINE_NATS_URL (chart: stream.natsCredentialsSecret)" },
  { name: "HOOKLINE_NATS_PASSWORD_FILE", default: "empty", range: "file path (with HOOKLINE_NATS_USER)", what: "stream mode: the file holding that user's password, read at each connection to NATS (a rotated Secret is used at the next one)" },
  { name: "HOOKLINE_NATS_TLS_CA_FILE", default: "empty: the system's CAs", range: "file path (PEM)", what: "stream mode: the CA that signed the NATS servers' certificates; set, the connection requires TLS, as tls:// does" },
  { name: "HOOKLINE_NATS_TLS_CERT_FILE", default: "empty: none", range: "file path (PEM, with HOOKLINE_NATS_TLS_KEY_FILE)", what: "stream mode: the operator's TLS client certificate, for a NATS that authenticates clients by certificate (verify or verify_and_map)" },
  { name: "HOOKLINE_NATS_TLS_KEY_FILE", default: "empty: none", range: "file path (PEM, with HOOKLINE_NATS_TLS_CERT_FILE)", what: "stream mode: its private key" },
  { name: "HOOKLINE_NATS_ALLOW_INSECURE", default: "false", range: "true, false", what: "stream mode: use a NATS that lets clients in without credentials, or connect without any; false: stream mode stays off and the operator is not ready, saying why (a throwaway server on your own machine only; see docs/security.md)" },
  { name: "HOOKLINE_INSTALLATION", default: "LEADER_ELECTION_NAMESPACE/LEADER_ELECTION_LEASE_NAME", range: "1..128 characters of A-Z a-z 0-9 . _ / -", what: "stream mode: the name this installation claims the namespaces' streams (HOOKLINE_<namespace>) and their consumers with; an installation finding a stream claimed by another refuses it and never deletes it (give each installation its own NATS account)" },
  { name: "WEBHOOK_DLQ_PATH", default: "unset", range: "refused when set", what: "the specification's SQLite dead-letter file: refused at start (exit 78), not ignored; a dead letter is a WebhookDelivery in phase DeadLettered, bounded by WEBHOOK_DLQ_MAX_ENTRIES" },
  ...TRACING_ENV_DOCS,
];

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Why HOOKLINE_NATS_URL cannot be used, naming the variable (credentials redacted); undefined when it can. */
function natsUrlProblem(raw: string): string | undefined {
  try {
    parseNatsUrl(raw);
    return undefined;
  } catch (err) {
    if (!(err instanceof NatsUrlError)) throw err;
    return `HOOKLINE_NATS_URL=${JSON.stringify(redactNatsUrl(raw))} is invalid: ${err.message} (a nats:// or tls:// URL such as nats://nats.nats.svc:4222, or a comma-separated list of them; empty: stream mode off)`;
  }
}

/** Why WEBHOOK_DLQ_PATH is refused: where dead letters are instead. */
export const DLQ_PATH_REFUSED = (value: string): string =>
  `WEBHOOK_DLQ_PATH=${JSON.stringify(value)} is not used: Hookline keeps no dead-letter database; a dead letter is a WebhookDelivery in phase DeadLettered ` +
  `(kubectl get whdel --field-selector status.phase=DeadLettered), kept in etcd up to WEBHOOK_DLQ_MAX_ENTRIES and replayed with the hookline.dev/replay annotation; unset WEBHOOK_DLQ_PATH`;

// One line per variable: the complexity is the number of variables, each parsed once, in order.
// eslint-disable-next-line complexity
export function loadConfig(env: Env, overrides: { leaderElect?: boolean } = {}): Config {
  const problems: string[] = [];
  const int = (v: IntVar): number => {
    const raw = env[v.name];
    if (raw === undefined || raw.trim() === "") return v.default;
    const parsed = z.coerce.number().int().min(v.min).max(v.max).safeParse(raw.trim());
    if (!/^-?\d+$/.test(raw.trim()) || !parsed.success) {
      problems.push(`${v.name}=${JSON.stringify(raw)} is invalid: must be an integer from ${v.min} to ${v.max} (default ${v.default})`);
      return v.default;
    }
    return parsed.data;
  };
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    if ((allowed as readonly string[]).includes(raw.trim())) return raw.trim() as T;
    problems.push(`${name}=${JSON.stringify(raw)} is invalid: must be one of ${allowed.join(", ")} (default ${fallback})`);
    return fallback;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name]?.trim().toLowerCase();
    if (raw === undefined || raw === "") return fallback;
    if (raw === "true" || raw === "1") return true;
    if (raw === "false" || raw === "0") return false;
    problems.push(`${name}=${JSON.stringify(env[name])} is invalid: must be true or false (default ${fallback})`);
    return fallback;
  };

  const deliveryTimeoutMs = int(INT_VARS.deliveryTimeoutMs);
  const failureThreshold = int(INT_VARS.failureThreshold);
  const successThreshold = int(INT_VARS.successThreshold);
  const cooldownMs = int(INT_VARS.cooldownMs);
  const drainTimeoutMs = int(INT_VARS.drainTimeoutMs);
  const drainAction = oneOf("WEBHOOK_DRAIN_TIMEOUT_ACTION", ["requeue", "dead-letter"] as const, "requeue");
  const maxInFlight = int(INT_VARS.maxInFlight);
  const maxFinishedDeliveries = int(INT_VARS.maxFinishedDeliveries);
  const dlqMaxEntries = int(INT_VARS.dlqMaxEntries);
  const payloadCacheBytes = int(INT_VARS.payloadCacheBytes);
  const streamReplicas = int(INT_VARS.streamReplicas);
  const streamMaxHeldBytes = int(INT_VARS.streamMaxHeldBytes);
  const streamMaxAgeMs = int(INT_VARS.streamMaxAgeMs);
  const streamNamespaceMaxMessages = int(INT_VARS.streamNamespaceMaxMessages);
  const streamNamespaceMaxBytes = int(INT_VARS.streamNamespaceMaxBytes);
  const metricsPort = int(INT_VARS.metricsPort);
  const healthPort = int(INT_VARS.healthPort);
  const healthProbeIntervalMs = int(INT_VARS.healthProbeIntervalMs);
  const secretRefreshMs = int(INT_VARS.secretRefreshMs);
  const leaseDurationMs = int(INT_VARS.leaseDurationMs);
  const renewDeadlineMs = int(INT_VARS.renewDeadlineMs);
  const retryPeriodMs = int(INT_VARS.retryPeriodMs);
  if (renewDeadlineMs >= leaseDurationMs) {
    problems.push(`LEADER_ELECTION_RENEW_DEADLINE_MS=${renewDeadlineMs} must be shorter than LEADER_ELECTION_LEASE_DURATION_MS=${leaseDurationMs}`);
  }
  if (retryPeriodMs >= renewDeadlineMs) {
    problems.push(`LEADER_ELECTION_RETRY_PERIOD_MS=${retryPeriodMs} must be shorter than LEADER_ELECTION_RENEW_DEADLINE_MS=${renewDeadlineMs}`);
  }
  // The specification's SQLite dead-letter store: set, it would be ignored, and whoever set it
  // would look for a file that never comes (docs/configuration.md, "Variables refused").
  if (env.WEBHOOK_DLQ_PATH !== undefined && env.WEBHOOK_DLQ_PATH.trim() !== "") problems.push(DLQ_PATH_REFUSED(env.WEBHOOK_DLQ_PATH));

  const allowedNetworksText = env.WEBHOOK_ALLOWED_NETWORKS?.trim() ?? "";
  let allowedNetworks: Cidr[] = [];
  try {
    allowedNetworks = parseCidrList(allowedNetworksText);
  } catch (err) {
    problems.push(`WEBHOOK_ALLOWED_NETWORKS=${JSON.stringify(allowedNetworksText)} is invalid: ${(err as Error).message} (a comma-separated list of CIDRs such as 10.0.0.0/8,fd00::/8; empty: public addresses only)`);
  }

  const { proxy, proxyText } = loadProxy(env, problems);

  const providersText = env.HOOKLINE_METRIC_PROVIDERS ?? DEFAULT_PROVIDERS.join(",");
  const providers = parseProviders(providersText);
  if (!providers.ok) problems.push(`HOOKLINE_METRIC_PROVIDERS=${JSON.stringify(providersText.slice(0, 200))} is invalid: it ${providers.problem} (a comma-separated list such as ${DEFAULT_PROVIDERS.join(",")})`);

  const watchNamespaces = (env.WATCH_NAMESPACES ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const ns of watchNamespaces) {
    if (!NAMESPACE.test(ns) || ns.length > 63) problems.push(`WATCH_NAMESPACES contains ${JSON.stringify(ns)}, which is not a namespace name (a comma-separated list of namespaces; empty: all)`);
  }

  const { port: publishPort, ...publish } = loadPublishDoor(env, problems, int);
  const metrics = loadMetricsServer(env, problems);
  const tracingWarnings: TracingWarning[] = [];
  const tracing = loadTracing(env, problems, tracingWarnings);

  const leaseName = env.LEADER_ELECTION_LEASE_NAME?.trim() || "hookline-leader";
  const leaseNamespace = env.LEADER_ELECTION_NAMESPACE?.trim() || env.POD_NAMESPACE?.trim() || "default";
  for (const [name, value] of [["LEADER_ELECTION_LEASE_NAME", leaseName], ["LEADER_ELECTION_NAMESPACE", leaseNamespace]] as const) {
    if (!NAMESPACE.test(value)) problems.push(`${name}=${JSON.stringify(value)} is invalid: must be a lowercase RFC 1123 name`);
  }
  const leaderElect = overrides.leaderElect ?? bool("LEADER_ELECT", true);
  const identity = env.POD_NAME?.trim() || `${hostname()}-${randomBytes(4).toString("hex")}`;
  const logLevel = oneOf("LOG_LEVEL", LOG_LEVELS, "info");

  const natsRaw = env.HOOKLINE_NATS_URL?.trim() || undefined;
  const natsProblem = natsRaw === undefined ? undefined : natsUrlProblem(natsRaw);
  if (natsProblem) problems.push(natsProblem);
  const natsAuth = loadNatsAuth(env, natsRaw !== undefined && natsProblem === undefined ? natsRaw : undefined, natsRaw !== undefined, problems, bool("HOOKLINE_NATS_ALLOW_INSECURE", false));
  const installation = env.HOOKLINE_INSTALLATION?.trim() || `${leaseNamespace}/${leaseName}`;
  if (!INSTALLATION.test(installation)) problems.push(`HOOKLINE_INSTALLATION=${JSON.stringify(env.HOOKLINE_INSTALLATION)} is invalid: 1 to 128 characters of A-Z a-z 0-9 . _ / - (default LEADER_ELECTION_NAMESPACE/LEADER_ELECTION_LEASE_NAME)`);

  if (problems.length) throw new ConfigError(problems);
  return {
    deliveryTimeoutMs,
    breaker: { failureThreshold, successThreshold, cooldownMs },
    drain: { timeoutMs: drainTimeoutMs, action: drainAction },
    maxInFlight,
    maxFinishedDeliveries,
    dlqMaxEntries,
    allowedNetworks,
    allowedNetworksText,
    proxy,
    proxyText,
    watchNamespaces,
    metricsPort,
    metrics,
    healthPort,
    publishPort,
    publish,
    tracing,
    tracingWarnings,
    healthProbeIntervalMs,
    secretRefreshMs,
    leaderElection: { enabled: leaderElect, leaseName, leaseNamespace, identity, leaseDurationMs, renewDeadlineMs, retryPeriodMs },
    logLevel,
    natsUrl: natsRaw,
    natsUrlRedacted: natsRaw === undefined ? undefined : redactNatsUrl(natsRaw),
    payloadCacheBytes,
    metricProviders: providers.ok ? providers.providers : [...DEFAULT_PROVIDERS],
    streamReplicas,
    streamMaxHeldBytes,
    streamMaxAgeMs,
    streamNamespaceMaxMessages,
    streamNamespaceMaxBytes,
    natsAuth,
    installation,
  };
}

const INSTALLATION = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/;

/** HOOKLINE_NATS_USER, _PASSWORD_FILE, _TLS_* and _ALLOW_INSECURE: checked together, and against the URL's own credentials. */
function loadNatsAuth(env: Env, url: string | undefined, streamMode: boolean, problems: string[], allowInsecure: boolean): NatsAuthConfig {
  const user = env.HOOKLINE_NATS_USER?.trim() || undefined;
  const passwordFile = env.HOOKLINE_NATS_PASSWORD_FILE?.trim() || undefined;
  const tls = { caFile: env.HOOKLINE_NATS_TLS_CA_FILE?.trim() || undefined, certFile: env.HOOKLINE_NATS_TLS_CERT_FILE?.trim() || undefined, keyFile: env.HOOKLINE_NATS_TLS_KEY_FILE?.trim() || undefined };
  const given = { HOOKLINE_NATS_USER: user, HOOKLINE_NATS_PASSWORD_FILE: passwordFile, HOOKLINE_NATS_TLS_CA_FILE: tls.caFile, HOOKLINE_NATS_TLS_CERT_FILE: tls.certFile, HOOKLINE_NATS_TLS_KEY_FILE: tls.keyFile };
  const set = Object.keys(given).filter((n) => given[n as keyof typeof given] !== undefined);
  if (!streamMode && set.length) problems.push(`${set.join(", ")} ${set.length > 1 ? "are" : "is"} set but HOOKLINE_NATS_URL is empty: they are stream mode's (set HOOKLINE_NATS_URL, or remove them)`);
  if ((user === undefined) !== (passwordFile === undefined)) problems.push(`${user === undefined ? "HOOKLINE_NATS_PASSWORD_FILE is set without HOOKLINE_NATS_USER" : "HOOKLINE_NATS_USER is set without HOOKLINE_NATS_PASSWORD_FILE"}: give both (the user, and the file holding its password)`);
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) problems.push(`${tls.certFile === undefined ? "HOOKLINE_NATS_TLS_KEY_FILE is set without HOOKLINE_NATS_TLS_CERT_FILE" : "HOOKLINE_NATS_TLS_CERT_FILE is set without HOOKLINE_NATS_TLS_KEY_FILE"}: give both (the client certificate and its key)`);
  if (user !== undefined && url !== undefined) {
    const parsed = parseNatsUrl(url);
    if (parsed.user !== undefined || parsed.token !== undefined) problems.push("HOOKLINE_NATS_USER is set and HOOKLINE_NATS_URL holds credentials too: give them once (the URL without user and password, or no HOOKLINE_NATS_USER)");
  }
  const out: NatsAuthConfig = { allowInsecure };
  if (user !== undefined && passwordFile !== undefined) out.credentials = { user, passwordFile };
  const files = Object.fromEntries(Object.entries(tls).filter(([, f]) => f !== undefined)) as NonNullable<NatsAuthConfig["tls"]>;
  if (Object.keys(files).length) out.tls = files;
  return out;
}

/** Advice about a valid configuration: the operator logs each at start (level warn). */
export interface ConfigWarning {
  /** The variable the advice is about. */
  variable: string;
  message: string;
}

/**
 * What the operator should warn about at start: WEBHOOK_CB_TIMEOUT_MS shorter than the largest
 * delay of the default retry policy (the one a subscription setting no `retry` gets), so an
 * open breaker would probe sooner than the retries wait (subscriptions with their own retry or
 * circuitBreaker.cooldown get the same advice on their ConfigurationAdvice condition,
 * core/advice.ts); and advice about the OpenTelemetry variables.
 */
export function configWarnings(config: Pick<Config, "breaker"> & Partial<Pick<Config, "tracingWarnings">>): ConfigWarning[] {
  return [...breakerWarnings(config), ...(config.tracingWarnings ?? [])];
}

function breakerWarnings(config: Pick<Config, "breaker">): ConfigWarning[] {
  const r = retrySchema.parse({});
  const retry = { maxAttempts: r.maxAttempts, initialBackoffMs: parseDuration(r.initialBackoff), multiplier: r.multiplier, maxBackoffMs: parseDuration(r.maxBackoff), jitterPercent: r.jitterPercent };
  const largest = largestRetryDelayMs(retry);
  const cooldown = config.breaker.cooldownMs;
  if (cooldown >= largest) return [];
  return [
    {
      variable: INT_VARS.cooldownMs.name,
      message:
        `${INT_VARS.cooldownMs.name}=${cooldown} is shorter than the largest delay of the default retry policy, ${largest} ms (${describeRetrySchedule(retry)}): ` +
        `an open breaker would probe sooner than the retries wait, and a probe into the same outage opens it again at once; ` +
        `set it to at least ${largest}. Subscriptions that set circuitBreaker.cooldown or retry are checked on their own (condition ConfigurationAdvice).`,
    },
  ];
}

/** HTTPS_PROXY, HTTP_PROXY and NO_PROXY (uppercase first, then lowercase, as Go's net/http reads them). */
function loadProxy(env: Env, problems: string[]): { proxy: ProxyEnv; proxyText: string } {
  const proxyVar = (name: string, upper: string | undefined, lower: string | undefined): { name: string; value: string } =>
    upper?.trim() ? { name, value: upper.trim() } : { name: name.toLowerCase(), value: lower?.trim() ?? "" };
  const proxyUrl = (v: { name: string; value: string }): URL | undefined => {
    if (v.value === "") return undefined;
    try {
      return parseProxyUrl(v.value);
    } catch (err) {
      // The value is not repeated: it may hold credentials.
      problems.push(`${v.name} is invalid: ${(err as Error).message}`);
      return undefined;
    }
  };
  const httpsProxy = proxyUrl(proxyVar("HTTPS_PROXY", env.HTTPS_PROXY, env.https_proxy));
  const httpProxy = proxyUrl(proxyVar("HTTP_PROXY", env.HTTP_PROXY, env.http_proxy));
  const noProxyVar = proxyVar("NO_PROXY", env.NO_PROXY, env.no_proxy);
  let noProxy = NO_PROXY_NONE;
  try {
    noProxy = parseNoProxy(noProxyVar.value);
  } catch (err) {
    problems.push(`${noProxyVar.name}=${JSON.stringify(noProxyVar.value)} is invalid: ${(err as Error).message} (a comma-separated list of domains, IP addresses, CIDRs or *)`);
  }
  const parts = [httpsProxy && `HTTPS_PROXY=${redactProxyUrl(httpsProxy)}`, httpProxy && `HTTP_PROXY=${redactProxyUrl(httpProxy)}`, (httpsProxy || httpProxy) && noProxyVar.value && `NO_PROXY=${noProxyVar.value}`];
  return { proxy: { httpsProxy, httpProxy, noProxy }, proxyText: parts.filter(Boolean).join(" ") };
}
