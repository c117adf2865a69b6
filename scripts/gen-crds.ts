// Writes crds/*.yaml and docs/api.md from the zod schemas in src/api, and the chart's defaults for
// its templates (charts/hookline/templates/_defaults.tpl) from its values.yaml. `--check` fails
// when the files are stale.
import { readFileSync, writeFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { SECRET_REFERENCE_ROOTS, secretReferencePolicySpec } from "../src/api/admission.js";
import { deliveryCrd, replayCrd, subscriptionCrd } from "../src/api/crd.js";
import { MAX_HEADERS_FROM } from "../src/api/subscription.js";
import { apiReference } from "./api-doc.js";
import { chartDefaults, defaultsTemplate } from "./chart-defaults.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const header = "# Generated from src/api by `npm run gen`. Do not edit by hand.\n";
const files: Record<string, string> = {
  "crds/hookline.dev_webhooksubscriptions.yaml": header + stringify(subscriptionCrd(), { lineWidth: 0 }),
  "crds/hookline.dev_webhookdeliveries.yaml": header + stringify(deliveryCrd(), { lineWidth: 0 }),
  "crds/hookline.dev_webhookreplays.yaml": header + stringify(replayCrd(), { lineWidth: 0 }),
};
files["docs/api.md"] = await apiReference();
files["charts/hookline/templates/secret-reference-policy.yaml"] = secretReferencePolicyTemplate();
files["charts/hookline/templates/_defaults.tpl"] = defaultsTemplate(chartDefaults(join(root, "charts/hookline")));
// The chart ships the same files (Helm installs crds/ before templates).
for (const [path, text] of Object.entries(files)) {
  if (!path.startsWith("crds/")) continue;
  if (existsSync(join(root, "charts/hookline"))) files[path.replace(/^crds\//, "charts/hookline/crds/")] = text;
}

const check = process.argv.includes("--check");
const stale: string[] = [];
for (const [path, text] of Object.entries(files)) {
  const full = join(root, path);
  const current = existsSync(full) ? readFileSync(full, "utf8") : undefined;
  if (current === text) continue;
  if (check) stale.push(path);
  else {
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
    console.log(`wrote ${path}`);
  }
}
if (stale.length) {
  console.error(`generated files are stale: ${stale.join(", ")}\nrun \`npm run gen\` and commit the result`);
  process.exit(1);
}
if (check) console.log("generated files are up to date");

/**
 * The chart's "no confused deputy" ValidatingAdmissionPolicy and its binding: the CEL comes
 * from src/api/admission.ts, the rest is Helm (values secretReferencePolicy.*).
 */
function secretReferencePolicyTemplate(): string {
  const spec = (url: boolean) =>
    stringify(secretReferencePolicySpec({ url, maxHeadersFrom: MAX_HEADERS_FROM }), { lineWidth: 0 })
      .trimEnd()
      .split("\n")
      .map((l) => `  ${l}`)
      .join("\n");
  return `{{- /*
Generated from src/api/admission.ts by \`npm run gen\`. Do not edit by hand.
No confused deputy: a WebhookSubscription may name only Secrets its author may get. Refuses a
create, or an update that changes a Secret reference (${SECRET_REFERENCE_ROOTS.join(", ")}), unless the
requesting user may get each Secret it names. docs/security.md explains what it stops.
*/ -}}
{{- $_ := include "hookline.fillDefaults" . -}}
{{- if .Values.secretReferencePolicy.enabled }}
{{- $fullname := include "hookline.fullname" . }}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ $fullname }}-secret-references
  labels:
    {{- include "hookline.labels" . | nindent 4 }}
spec:
{{- if .Values.secretReferencePolicy.recheckOnURLChange }}
${spec(true)}
{{- else }}
${spec(false)}
{{- end }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ $fullname }}-secret-references
  labels:
    {{- include "hookline.labels" . | nindent 4 }}
spec:
  policyName: {{ $fullname }}-secret-references
  validationActions: {{ toJson .Values.secretReferencePolicy.validationActions }}
  matchResources:
    {{- if .Values.watchNamespaces }}
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: In
          values: {{ toJson .Values.watchNamespaces }}
    {{- else }}
    namespaceSelector: {{ toJson .Values.secretReferencePolicy.namespaceSelector }}
    {{- end }}
{{- end }}
`;
}
