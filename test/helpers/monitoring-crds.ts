// Minimal CRDs for monitoring.coreos.com ServiceMonitor and PrometheusRule (the Prometheus
// Operator's kinds are not part of Kubernetes). Typed for the fields the chart uses, without
// x-kubernetes-preserve-unknown-fields, so `kubectl apply --dry-run=server --validate=strict`
// refuses a misspelled or mistyped field in them like the real CRDs would. The PromQL inside
// is checked separately by promtool (test/integration/dashboard.test.ts).
const str = { type: "string" };
const strMap = { type: "object", additionalProperties: str };
const labelSelector = {
  type: "object",
  properties: {
    matchLabels: strMap,
    matchExpressions: { type: "array", items: { type: "object", properties: { key: str, operator: str, values: { type: "array", items: str } } } },
  },
};

function crd(plural: string, kind: string, spec: unknown): unknown {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.monitoring.coreos.com` },
    spec: {
      group: "monitoring.coreos.com",
      scope: "Namespaced",
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: { type: "object", properties: { spec } } } }],
    },
  };
}

export const MONITORING_CRDS = [
  crd("servicemonitors", "ServiceMonitor", {
    type: "object",
    required: ["selector", "endpoints"],
    properties: {
      jobLabel: str,
      namespaceSelector: { type: "object", properties: { any: { type: "boolean" }, matchNames: { type: "array", items: str } } },
      selector: labelSelector,
      endpoints: {
        type: "array",
        items: {
          type: "object",
          properties: {
            port: str,
            path: str,
            scheme: str,
            interval: { type: "string", pattern: "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$" },
            scrapeTimeout: { type: "string", pattern: "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$" },
            honorLabels: { type: "boolean" },
            // As prometheus-operator's CRD has them (SafeTLSConfig's ca: a Secret or ConfigMap key).
            bearerTokenFile: str,
            tlsConfig: {
              type: "object",
              properties: {
                serverName: str,
                insecureSkipVerify: { type: "boolean" },
                ca: { type: "object", properties: { secret: { type: "object", required: ["key"], properties: { name: str, key: str, optional: { type: "boolean" } } }, configMap: { type: "object", required: ["key"], properties: { name: str, key: str, optional: { type: "boolean" } } } } },
                caFile: str,
              },
            },
          },
        },
      },
    },
  }),
  crd("prometheusrules", "PrometheusRule", {
    type: "object",
    properties: {
      groups: {
        type: "array",
        items: {
          type: "object",
          required: ["name", "rules"],
          properties: {
            name: { type: "string", minLength: 1 },
            interval: str,
            rules: {
              type: "array",
              items: {
                type: "object",
                required: ["expr"],
                properties: {
                  alert: str,
                  record: str,
                  expr: { "x-kubernetes-int-or-string": true },
                  for: { type: "string", pattern: "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$" },
                  keep_firing_for: str,
                  labels: strMap,
                  annotations: strMap,
                },
              },
            },
          },
        },
      },
    },
  }),
];
