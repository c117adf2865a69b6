// Helm from the project's own build (hack/build-helm.sh: Go module proxy, cached; built by the
// global setup), and helpers to render the chart in charts/hookline into objects.
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { exec, type ExecResult } from "./exec.js";
import { testTools } from "./tools.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CHART = `${ROOT}charts/hookline`;

/** The helm binary the global setup built. */
export function helmBin(): string {
  return testTools().helm;
}

export function helm(args: string[], opts: { timeoutMs?: number } = {}): Promise<ExecResult> {
  return exec(helmBin(), args, { timeoutMs: opts.timeoutMs ?? 60_000, env: { ...process.env, HELM_CACHE_HOME: "/tmp/hookline-helm-cache", HELM_CONFIG_HOME: "/tmp/hookline-helm-config", HELM_DATA_HOME: "/tmp/hookline-helm-data" } });
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
   
  [key: string]: any;
}

export interface RenderOptions {
  release?: string;
  namespace: string;
  valuesFiles?: string[];
  /** --set-json key=JSON pairs. */
  setJson?: Record<string, unknown>;
  includeCrds?: boolean;
  showOnly?: string[];
}

export function templateArgs(o: RenderOptions): string[] {
  const args = ["template", o.release ?? "hookline", CHART, "--namespace", o.namespace];
  for (const f of o.valuesFiles ?? []) args.push("--values", f);
  for (const [k, v] of Object.entries(o.setJson ?? {})) args.push("--set-json", `${k}=${JSON.stringify(v)}`);
  if (o.includeCrds) args.push("--include-crds");
  for (const s of o.showOnly ?? []) args.push("--show-only", s);
  return args;
}

/** helm template; throws with helm's stderr when it fails. */
export async function render(o: RenderOptions): Promise<{ yaml: string; objects: K8sObject[] }> {
  const r = await helm(templateArgs(o));
  if (r.code !== 0) throw new Error(`helm ${templateArgs(o).join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return { yaml: r.stdout, objects: parseManifests(r.stdout) };
}

export function parseManifests(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors[0]!.message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => !!o && typeof o === "object");
}

export function find(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const o = objects.find((x) => x.kind === kind && (name === undefined || x.metadata.name === name));
  if (!o) throw new Error(`no ${kind}${name ? ` ${name}` : ""} among ${objects.map((x) => `${x.kind}/${x.metadata.name}`).join(", ")}`);
  return o;
}
