// Who may read /metrics when METRICS_AUTH=kubernetes: a caller with a bearer token the API server
// authenticates (TokenReview, the API server's own audiences: Prometheus sends its
// ServiceAccount's token as it is) whose user may `get` the non-resource URL /metrics
// (SubjectAccessReview; the chart's <release>-metrics-reader ClusterRole grants it), as
// controller-runtime's secure metrics filter asks. Answers are kept 10 s (auth.ts), so a
// scrape every 30 s costs two reviews; failed authentications are limited per client address
// (auth-failures.ts), so made-up tokens cannot turn the port into a TokenReview flood.
// The token is never logged.
import type { KubeClient } from "../kube/client.js";
import { METRICS_PATH, type MetricsGuard } from "../observability/http-servers.js";
import { AuthFailureLimiter, clientKey, DEFAULT_AUTH_FAILURE_LIMIT } from "./auth-failures.js";
import { bearerToken, Reviewer } from "./auth.js";

const CHALLENGE = { "www-authenticate": 'Bearer realm="hookline-metrics"' };

export function kubernetesMetricsGuard(client: KubeClient, opts: { now?: () => number } = {}): MetricsGuard {
  const reviewer = new Reviewer(client, { audiences: "api-server", ...(opts.now ? { now: opts.now } : {}) });
  const failures = new AuthFailureLimiter(DEFAULT_AUTH_FAILURE_LIMIT, opts.now ? { now: opts.now } : {});
  return {
    async check(req) {
      const token = bearerToken(req);
      if (!token) return { status: 401, message: "send a bearer token (Authorization: Bearer <token>) of a user allowed to get /metrics", headers: CHALLENGE };
      const client = clientKey(req.socket.remoteAddress);
      const known = reviewer.knows(token);
      if (!known) {
        const allowance = failures.take(client);
        if (!allowance.ok) return { status: 429, message: "too many failed authentications from this address", headers: { "retry-after": String(allowance.retryAfterSeconds) } };
      }
      let authn;
      try {
        authn = await reviewer.authenticate(token);
      } catch {
        if (!known) failures.refund(client);
        return { status: 503, message: "the API server could not review the token; try again" };
      }
      if (!authn.ok) return { status: 401, message: "the token is not valid", headers: CHALLENGE };
      if (!known) failures.refund(client);
      let authz;
      try {
        authz = await reviewer.mayGetUrl(authn.caller, METRICS_PATH);
      } catch {
        return { status: 503, message: "the API server could not review the access; try again" };
      }
      if (!authz.allowed) return { status: 403, message: `${authz.reason}: bind the metrics-reader ClusterRole to it` };
      return undefined;
    },
  };
}
