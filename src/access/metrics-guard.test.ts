// The guard's order of questions and its limit on failed authentications, with the API server's
// two reviews answered by a stand-in (test/integration/metrics-auth.test.ts asks a real one).
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import type { KubeClient } from "../kube/client.js";
import { kubernetesMetricsGuard } from "./metrics-guard.js";

const USERS: Record<string, { username: string; mayGet: boolean }> = {
  "reader-token": { username: "system:serviceaccount:monitoring:prometheus", mayGet: true },
  "stranger-token": { username: "system:serviceaccount:shop:stranger", mayGet: false },
};

function fakeApi() {
  const calls: string[] = [];
  const client = {
    request: ({ body }: { body: { kind: string; spec: { token?: string; user?: string; audiences?: string[]; nonResourceAttributes?: unknown } } }) => {
      calls.push(body.kind);
      if (body.kind === "TokenReview") {
        // The API server's own audiences: no spec.audiences asked for.
        expect(body.spec.audiences).toBeUndefined();
        const u = USERS[body.spec.token!];
        return Promise.resolve({ status: u ? { authenticated: true, user: { username: u.username, groups: [] } } : { authenticated: false, error: "invalid bearer token" } });
      }
      expect(body.spec.nonResourceAttributes).toEqual({ path: "/metrics", verb: "get" });
      const u = Object.values(USERS).find((x) => x.username === body.spec.user);
      return Promise.resolve({ status: { allowed: u?.mayGet ?? false } });
    },
  } as unknown as KubeClient;
  return { client, calls };
}

const req = (token?: string, address = "10.0.0.7") => ({ headers: token ? { authorization: `Bearer ${token}` } : {}, socket: { remoteAddress: address } }) as unknown as IncomingMessage;

describe("kubernetesMetricsGuard", () => {
  it("401 without a token or with an unknown one, 403 without the right, through for the reader; answers reused", async () => {
    const { client, calls } = fakeApi();
    const guard = kubernetesMetricsGuard(client);
    expect((await guard.check(req()))?.status).toBe(401);
    expect((await guard.check(req("made-up")))?.status).toBe(401);
    expect(await guard.check(req("stranger-token"))).toMatchObject({ status: 403, message: expect.stringContaining("system:serviceaccount:shop:stranger may not get /metrics") });
    expect(await guard.check(req("reader-token"))).toBeUndefined();
    const reviews = calls.length;
    expect(await guard.check(req("reader-token"))).toBeUndefined();
    expect(calls.length).toBe(reviews);
  });

  it("made-up tokens from one address get 10 reviews, then 429 without asking; a known token is never held back, another address is not", async () => {
    const { client, calls } = fakeApi();
    let now = 0;
    const guard = kubernetesMetricsGuard(client, { now: () => now });
    expect(await guard.check(req("reader-token"))).toBeUndefined();
    for (let i = 0; i < 10; i++) expect((await guard.check(req(`made-up-${i}`)))?.status).toBe(401);
    const asked = calls.length;
    const held = await guard.check(req("made-up-10"));
    expect(held).toMatchObject({ status: 429, headers: { "retry-after": "6" } });
    expect(calls.length).toBe(asked);
    expect(await guard.check(req("reader-token"))).toBeUndefined();
    expect((await guard.check(req("made-up-11", "10.0.0.8")))?.status).toBe(401);
    now += 6_000;
    expect((await guard.check(req("made-up-12")))?.status).toBe(401);
  });
});
