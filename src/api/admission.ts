// "No confused deputy": the operator can read the Secrets of every namespace it serves, so a
// subscription must not name a Secret its author could not read (a signing key turned into an
// HMAC oracle, a header value or client secret sent to the author's own URL). The chart ships a
// ValidatingAdmissionPolicy, built here from the list of Secret references in the schema
// (scripts/gen-crds.ts writes charts/hookline/templates/secret-reference-policy.yaml), that
// refuses a create, or an update changing any Secret reference, unless the requesting user may
// `get` each Secret it names.
import { GROUP, SUBSCRIPTION } from "./names.js";

/**
 * Every field of a WebhookSubscription that names a Secret (`[]`: each item of a list). A test
 * walks the CRD schema and fails when a Secret reference is missing here.
 */
export const SECRET_REFERENCE_FIELDS = [
  "spec.secretRef",
  "spec.headersFrom[].secretKeyRef",
  "spec.tls.clientCertificateSecretRef",
  "spec.tls.caBundleSecretRef",
  "spec.oauth2.clientIdSecretRef",
  "spec.oauth2.clientSecretSecretRef",
] as const;

/** The spec fields that hold them: an update that changes one of these is checked again (oauth2 whole: its tokenURL decides where the client secret goes). */
export const SECRET_REFERENCE_ROOTS = [...new Set(SECRET_REFERENCE_FIELDS.map((f) => f.split(".")[1]!.replace(/\[\]$/, "")))];

/** CEL: whether this request creates the subscription or changes one of its Secret references (or, with `url`, its URL). */
export function referencesChangedCel(opts: { url: boolean }): string {
  const field = (f: string) => `(has(object.spec.${f}) != has(oldObject.spec.${f}) || (has(object.spec.${f}) && object.spec.${f} != oldObject.spec.${f}))`;
  return ["request.operation == 'CREATE'", ...SECRET_REFERENCE_ROOTS.map(field), ...(opts.url ? ["object.spec.url != oldObject.spec.url", field("proxy")] : [])].join(" || ");
}

const allowed = (name: string) => `authorizer.group('').resource('secrets').namespace(request.namespace).name(${name}).check('get').allowed()`;

/**
 * One validation per place a Secret can be named (each item of headersFrom too): a message may
 * not call the authorizer, so only a validation of its own can say which Secret, in which
 * field, was refused.
 */
function validations(maxHeadersFrom: number) {
  const slots: Array<{ field: string; present: string; name: string }> = [];
  for (const field of SECRET_REFERENCE_FIELDS) {
    const [head, tail] = field.split("[]") as [string, string | undefined];
    const parts = head.split(".");
    const guards = parts.slice(1).map((_, i) => `has(object.${parts.slice(0, i + 2).join(".")})`).join(" && ");
    if (tail === undefined) slots.push({ field, present: guards, name: `object.${head}.name` });
    else for (let i = 0; i < maxHeadersFrom; i++) slots.push({ field: `${head}[${i}]${tail}`, present: `${guards} && size(object.${head}) > ${i}`, name: `object.${head}[${i}]${tail}.name` });
  }
  return slots.map((s) => ({
    expression: `!variables.changed || !(${s.present}) || ${allowed(s.name)}`,
    reason: "Forbidden",
    messageExpression: `'${SUBSCRIPTION.kind} ' + request.name + ': ${s.field} names Secret ' + ${s.name} + ', which ' + request.userInfo.username + ' may not get in namespace ' + request.namespace + ' (a subscription may only use Secrets its author can read)'`,
  }));
}

/** The policy's spec, for the chart template (with the URL re-check on or off). */
export function secretReferencePolicySpec(opts: { url: boolean; maxHeadersFrom: number }) {
  return {
    failurePolicy: "Fail",
    matchConstraints: {
      resourceRules: [{ apiGroups: [GROUP], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: [SUBSCRIPTION.plural] }],
    },
    variables: [{ name: "changed", expression: referencesChangedCel(opts) }],
    validations: validations(opts.maxHeadersFrom),
  };
}
