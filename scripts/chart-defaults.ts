// The chart's defaults as its templates read them: charts/hookline/templates/_defaults.tpl, which
// scripts/gen-crds.ts writes from values.yaml and values.schema.json (`npm run gen:check` fails
// when it is stale). `helm upgrade --reuse-values` renders the templates with the previous
// release's values and never reads this chart's values.yaml, so a block a newer chart added is
// missing from .Values; hookline.fillDefaults (_helpers.tpl) fills it in from this copy.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

export interface ChartDefaults {
  /** values.yaml, parsed. */
  values: Record<string, unknown>;
  /**
   * Dotted paths the templates leave absent when they are: a key whose schema allows null
   * (startupProbe, flowControl.borrowingLimitPercent) and a free-form map (labels, annotations,
   * podSecurityContext, resources.limits). Helm deletes a key set to null, so there absence is
   * the user's choice, not an older chart's gap. Filled only as part of a whole missing block.
   */
  keepAbsent: string[];
}

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  $ref?: string;
  allOf?: Schema[];
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The types and properties a schema node declares, through $ref and allOf. */
function facts(s: Schema, root: Schema & { definitions?: Record<string, Schema> }): { types: string[]; properties?: Record<string, Schema> } {
  const types: string[] = s.type === undefined ? [] : Array.isArray(s.type) ? [...s.type] : [s.type];
  let properties = s.properties ? { ...s.properties } : undefined;
  const parts: Schema[] = [...(s.allOf ?? [])];
  if (s.$ref) {
    const m = /^#\/definitions\/(.+)$/.exec(s.$ref);
    const target = m ? root.definitions?.[m[1]!] : undefined;
    if (!target) throw new Error(`values.schema.json: cannot resolve ${s.$ref}`);
    parts.push(target);
  }
  for (const p of parts) {
    const f = facts(p, root);
    types.push(...f.types);
    if (f.properties) properties = { ...f.properties, ...properties };
  }
  return { types, properties };
}

export function chartDefaults(chartDir: string): ChartDefaults {
  // YAML 1.1, as Helm reads values.yaml (sigs.k8s.io/yaml).
  const values = parse(readFileSync(join(chartDir, "values.yaml"), "utf8"), { version: "1.1" }) as Record<string, unknown>;
  const root = JSON.parse(readFileSync(join(chartDir, "values.schema.json"), "utf8")) as Schema & { definitions?: Record<string, Schema> };
  const keepAbsent: string[] = [];
  const walk = (node: Record<string, unknown>, schema: Schema, prefix: string): void => {
    const { properties } = facts(schema, root);
    for (const [key, value] of Object.entries(node)) {
      const path = prefix + key;
      const child = properties?.[key];
      if (!child) throw new Error(`values.yaml: ${path} has no schema in values.schema.json`);
      const f = facts(child, root);
      if (f.types.includes("null") || (isMap(value) && !f.properties)) keepAbsent.push(path);
      else if (isMap(value)) walk(value, child, `${path}.`);
    }
  };
  walk(values, root, "");
  return { values, keepAbsent };
}

/** templates/_defaults.tpl: the defaults as JSON in a named template (Helm gives templates no other way to read them). */
export function defaultsTemplate(d: ChartDefaults): string {
  const json = JSON.stringify({ values: d.values, keepAbsent: d.keepAbsent }, null, 2);
  if (json.includes("{{")) throw new Error("values.yaml: a value contains {{, which a named template cannot hold as text");
  return `{{- /*
Generated from values.yaml and values.schema.json by \`npm run gen\` (scripts/chart-defaults.ts).
Do not edit by hand. This chart's default values, which hookline.fillDefaults (_helpers.tpl)
puts where .Values lacks them, and the keys it leaves absent (keepAbsent): a key whose schema
allows null, and a free-form map, where absence is the user's choice (Helm deletes a key set
to null), unless their whole block is missing.
*/ -}}
{{- define "hookline.defaults" -}}
${json}
{{- end }}
`;
}
