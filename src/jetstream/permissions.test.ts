import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { operatorPermissions, publisherPermissions, OPERATOR_INBOX_PREFIX } from "./permissions.js";
import { subjectMatches } from "./subjects.js";

describe("publisherPermissions", () => {
  it("publishes the events of its namespaces only, and hears JetStream's acknowledgements", () => {
    const p = publisherPermissions(["shop", "billing", "shop"]);
    expect(p).toEqual({ publish: ["hookline.billing.>", "hookline.shop.>"], subscribe: ["_INBOX.>"] });
    const mayPublish = (s: string) => p.publish.some((f) => subjectMatches(f, s));
    expect(mayPublish("hookline.shop.order.paid")).toBe(true);
    for (const s of ["hookline.other.order.paid", "hookline.shopx.a", "$JS.API.STREAM.INFO.HOOKLINE", "$JS.ACK.HOOKLINE.x.1.1.1.1.1.0", "$KV.hookline-endpoints.endpoint.u"]) expect(mayPublish(s)).toBe(false);
    // It cannot hear what the operator pulls or asks.
    expect(p.subscribe.some((f) => subjectMatches(f, `${OPERATOR_INBOX_PREFIX}.abc.1`))).toBe(false);
  });

  it.each([[[]], [["*"]], [[">"]], [["a.b"]], [["Shop"]], [["a".repeat(64)]]])("refuses %j (not namespaces)", (namespaces) => {
    expect(() => publisherPermissions(namespaces)).toThrow();
  });
});

describe("operatorPermissions", () => {
  const p = operatorPermissions();
  const mayPublish = (s: string) => p.publish.some((f) => subjectMatches(f, s));

  it("reaches every namespace's stream, its consumers, pulls and acknowledgements, and the old single stream", () => {
    for (const stream of ["HOOKLINE_shop", "HOOKLINE_a-b", "HOOKLINE"]) {
      for (const verb of ["INFO", "CREATE", "UPDATE", "DELETE"]) expect(mayPublish(`$JS.API.STREAM.${verb}.${stream}`), `${verb} ${stream}`).toBe(true);
      for (const s of [`$JS.API.CONSUMER.LIST.${stream}`, `$JS.API.CONSUMER.INFO.${stream}.c`, `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.c`, `$JS.API.CONSUMER.DELETE.${stream}.c`, `$JS.API.CONSUMER.MSG.NEXT.${stream}.c`, `$JS.ACK.${stream}.c.1.7.1.1700000000000000000.0`]) expect(mayPublish(s), s).toBe(true);
    }
    expect(mayPublish("$JS.API.STREAM.LIST")).toBe(true);
  });

  it("nothing that removes or reads events besides its own pulls: no purge, message delete or get, direct get of a namespace's stream", () => {
    for (const s of ["$JS.API.STREAM.PURGE.HOOKLINE_shop", "$JS.API.STREAM.MSG.DELETE.HOOKLINE_shop", "$JS.API.STREAM.MSG.GET.HOOKLINE_shop", "$JS.API.DIRECT.GET.HOOKLINE_shop", "$JS.API.DIRECT.GET.HOOKLINE_shop.hookline.shop.x", "$JS.API.STREAM.SNAPSHOT.HOOKLINE_shop", "$JS.API.ACCOUNT.PURGE.x"]) expect(mayPublish(s), s).toBe(false);
  });

  it("replies only on its own inbox prefix", () => {
    expect(p.subscribe).toEqual(["_INBOX_hookline.>"]);
    expect(p.subscribe.some((f) => subjectMatches(f, "_INBOX.abc.1"))).toBe(false);
  });
});

describe("docs/stream-mode.md shows these permissions", () => {
  const doc = readFileSync(new URL("../../docs/stream-mode.md", import.meta.url), "utf8");
  const operator = operatorPermissions();

  it("in the table of the operator's user, subject for subject", () => {
    const rows = doc.split("\n").filter((l) => /^\s*\| (publish|subscribe) \|/.test(l));
    const listed = (kind: string) => rows.filter((r) => r.trim().startsWith(`| ${kind} |`)).flatMap((r) => [...r.split("|")[2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
    expect(listed("publish").sort()).toEqual([...operator.publish].sort());
    expect(listed("subscribe")).toEqual(operator.subscribe);
  });

  it("in the official NATS chart's values: the operator's user and a publisher of shop", () => {
    const block = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes("accounts:"));
    expect(block).toBeDefined();
    const users = (parse(block!) as { config: { merge: { accounts: { HOOKLINE: { users: Array<{ user: string; permissions: { publish: { allow: string[] }; subscribe: { allow: string[] } } }> } } } } }).config.merge.accounts.HOOKLINE.users;
    const perms = (name: string) => {
      const u = users.find((x) => x.user === name)!;
      return { publish: u.permissions.publish.allow, subscribe: u.permissions.subscribe.allow };
    };
    expect(perms("hookline-operator")).toEqual(operator);
    expect(perms("publisher-shop")).toEqual(publisherPermissions(["shop"]));
  });
});
