// API Priority and Fairness from the chart, against the real API server: the FlowSchema and
// PriorityLevelConfiguration rendered by helm are accepted, and the API server classifies the
// operator's ServiceAccount's requests on hookline.dev objects by them (the response headers
// X-Kubernetes-PF-FlowSchema-UID / -PriorityLevel-UID), while its Lease requests keep the
// built-in classification.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNamespace, deleteNamespace, kubectl, kubectlOk } from "../helpers/cluster.js";
import { find, render } from "../helpers/helm.js";
import { delivery } from "../helpers/kube.js";

/** The APF response headers of one kubectl request made with `token` (kubectl -v=8 prints them). */
async function classification(args: string[], token: string, input?: string): Promise<{ flowSchema?: string; priorityLevel?: string }> {
  const r = await kubectl([...args, "--token", token, "-v=8"], { input });
  // The last request is the one asked for; discovery requests come before it.
  const header = (name: string) => [...r.stderr.matchAll(new RegExp(`${name}: ([0-9a-f-]{36})`, "gi"))].pop()?.[1];
  return { flowSchema: header("X-Kubernetes-Pf-Flowschema-Uid"), priorityLevel: header("X-Kubernetes-Pf-Prioritylevel-Uid") };
}

const uid = async (kind: string, name: string) => (await kubectlOk(["get", kind, name, "-o", "jsonpath={.metadata.uid}"])).trim();

describe("chart: API Priority and Fairness for the operator", () => {
  let ns: string;
  const created: string[] = [];

  beforeAll(async () => {
    ns = await createNamespace("apf", { waitForServiceAccount: true });
  });
  afterAll(async () => {
    for (const ref of created) await kubectl(["delete", ref, "--ignore-not-found"]);
    if (ns) await deleteNamespace(ns);
  });

  it("renders nothing with flowControl.enabled=false", async () => {
    const { objects } = await render({ release: "hl", namespace: "hookline", setJson: { "flowControl.enabled": false } });
    expect(objects.filter((o) => o.apiVersion.startsWith("flowcontrol."))).toEqual([]);
  });

  it("the operator's requests on hookline.dev objects are classified by the chart's FlowSchema; its Lease requests are not", async () => {
    const { objects, yaml } = await render({ release: "hl", namespace: ns, setJson: { "flowControl.nominalConcurrencyShares": 7, "flowControl.producers.enabled": false }, showOnly: ["templates/flowcontrol.yaml", "templates/serviceaccount.yaml"] });
    const fs = find(objects, "FlowSchema", `hl-hookline-${ns}`);
    const pl = find(objects, "PriorityLevelConfiguration", `hl-hookline-${ns}`);
    expect(pl.spec.limited.nominalConcurrencyShares).toBe(7);
    created.push(`flowschema/${fs.metadata.name}`, `prioritylevelconfiguration/${pl.metadata.name}`);
    await kubectlOk(["apply", "--validate=strict", "-f", "-"], { input: yaml });

    const [fsUid, plUid] = [await uid("flowschema", fs.metadata.name), await uid("prioritylevelconfiguration", pl.metadata.name)];
    const token = (await kubectlOk(["create", "token", "hl-hookline", "-n", ns])).trim();
    // Authorization comes after classification: a 403 answer carries the headers too.
    const mine = await classification(["get", "webhookdeliveries.hookline.dev", "-n", ns], token);
    expect(mine).toEqual({ flowSchema: fsUid, priorityLevel: plUid });
    const lease = await classification(["get", "leases.coordination.k8s.io", "-n", ns], token);
    expect(lease.flowSchema).toBeDefined();
    expect(lease.flowSchema).not.toBe(fsUid);
    // The schema is in use: the API server reports no dangling priority level.
    const status = JSON.parse(await kubectlOk(["get", "flowschema", fs.metadata.name, "-o", "json"])) as { status?: { conditions?: Array<{ type: string; status: string }> } };
    expect(status.status?.conditions?.find((c) => c.type === "Dangling")?.status).toBe("False");
  });

  it("producers' writes of hookline.dev objects are classified by the producers' FlowSchema, one flow per namespace; the operator's and producers' reads are not", async () => {
    const { objects, yaml } = await render({ release: "hl2", namespace: ns, showOnly: ["templates/flowcontrol.yaml", "templates/serviceaccount.yaml"] });
    const mineFs = find(objects, "FlowSchema", `hl2-hookline-${ns}`);
    const fs = find(objects, "FlowSchema", `hl2-hookline-producers-${ns}`);
    const pl = find(objects, "PriorityLevelConfiguration", `hl2-hookline-producers-${ns}`);
    expect(fs.spec.distinguisherMethod).toEqual({ type: "ByNamespace" });
    expect(fs.spec.matchingPrecedence).toBeGreaterThan(mineFs.spec.matchingPrecedence);
    expect(pl.spec.limited).toMatchObject({ nominalConcurrencyShares: 1, lendablePercent: 0, borrowingLimitPercent: 0 });
    for (const o of objects.filter((x) => x.apiVersion.startsWith("flowcontrol."))) created.push(`${o.kind.toLowerCase()}/${o.metadata.name}`);
    await kubectlOk(["apply", "--validate=strict", "-f", "-"], { input: yaml });

    const [fsUid, plUid, mineUid] = [await uid("flowschema", fs.metadata.name), await uid("prioritylevelconfiguration", pl.metadata.name), await uid("flowschema", mineFs.metadata.name)];
    await kubectlOk(["create", "serviceaccount", "producer", "-n", ns]);
    const producer = (await kubectlOk(["create", "token", "producer", "-n", ns])).trim();
    const operator = (await kubectlOk(["create", "token", "hl2-hookline", "-n", ns])).trim();
    const manifest = JSON.stringify(delivery(ns, "apf", "none"));
    // The producer has no rights here: a 403 answer carries the classification too.
    expect(await classification(["create", "-f", "-"], producer, manifest)).toEqual({ flowSchema: fsUid, priorityLevel: plUid });
    expect(await classification(["delete", "webhookdeliveries.hookline.dev", "absent", "-n", ns], producer)).toEqual({ flowSchema: fsUid, priorityLevel: plUid });
    expect((await classification(["get", "webhookdeliveries.hookline.dev", "-n", ns], producer)).flowSchema).not.toBe(fsUid);
    // The operator's own writes match its FlowSchema first.
    expect((await classification(["create", "-f", "-"], operator, manifest)).flowSchema).toBe(mineUid);
  });

  it("refuses a producers' FlowSchema that would match before the operator's", async () => {
    await expect(render({ release: "hl", namespace: "hookline", setJson: { "flowControl.matchingPrecedence": 8500 } })).rejects.toThrow(/flowControl\.producers\.matchingPrecedence .*greater than flowControl\.matchingPrecedence/);
  });
});
