// sendWithCredentials against a real receiver and a real token endpoint on 127.0.0.1: Secret
// headers merged, Bearer tokens, exactly one refresh and one re-send on a 401 inside the
// attempt; and the rules for header values read from Secrets.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Receiver } from "../../../test/helpers/receiver.js";
import { TokenServer } from "../../../test/helpers/token-server.js";
import { parseCidrList } from "../../core/request/netguard.js";
import { CREDENTIALS_MISSING_CODE, headerValueProblem, sendWithCredentials, withCredentials, type ResolvedCredentials } from "./credentials.js";
import { OAuth2Client } from "./oauth2.js";
import { Sender } from "./sender.js";

const CLIENT = { id: "hookline", secret: "client-secret-value" };
const sender = new Sender({ allowedNetworks: parseCidrList("127.0.0.0/8") });
let tokens: TokenServer;
let receiver: Receiver;
let refuseAll = false;

beforeAll(async () => {
  tokens = await TokenServer.start(CLIENT);
  receiver = await Receiver.start((req) => (!refuseAll && tokens.valid(req.headers.authorization) ? 200 : 401));
});
afterAll(async () => {
  await sender.destroy();
  await Promise.all([tokens.close(), receiver.close()]);
});

const creds = (key: string): ResolvedCredentials => ({
  kind: "ok",
  headers: { "X-Api-Key": "from-a-secret" },
  oauth2: { key, namespace: "shop", tokenURL: tokens.url(), clientId: CLIENT.id, clientSecret: CLIENT.secret, scopes: [], clientAuthentication: "ClientSecretBasic" },
});
const request = () => ({ url: receiver.url(), headers: { "content-type": "application/json", "webhook-id": "msg_1" }, body: "{}", timeoutMs: 2_000 });

describe("sendWithCredentials", () => {
  it("adds the Secret headers and a Bearer token; the next attempt reuses the token", async () => {
    const oauth2 = new OAuth2Client(sender, { userAgent: "t" });
    const c = creds("reuse");
    const t0 = tokens.requests.length;
    const r0 = receiver.requests.length;
    expect(await sendWithCredentials(sender, oauth2, c, request())).toMatchObject({ kind: "response", status: 200 });
    expect(await sendWithCredentials(sender, oauth2, c, request())).toMatchObject({ kind: "response", status: 200 });
    expect(tokens.requests.length - t0).toBe(1);
    const got = receiver.requests.slice(r0);
    expect(got.map((r) => r.headers["x-api-key"])).toEqual(["from-a-secret", "from-a-secret"]);
    expect(got.map((r) => r.headers.authorization)).toEqual([`Bearer ${tokens.tokens.at(-1)}`, `Bearer ${tokens.tokens.at(-1)}`]);
  });

  it("a 401 (token revoked): exactly one new token and one re-send, same webhook-id; its answer is the outcome", async () => {
    const oauth2 = new OAuth2Client(sender, { userAgent: "t" });
    const c = creds("revoked");
    await sendWithCredentials(sender, oauth2, c, request());
    tokens.revoke(tokens.tokens.at(-1)!);
    const t0 = tokens.requests.length;
    const r0 = receiver.requests.length;
    expect(await sendWithCredentials(sender, oauth2, c, request())).toMatchObject({ kind: "response", status: 200 });
    expect(tokens.requests.length - t0).toBe(1);
    const got = receiver.requests.slice(r0);
    expect(got).toHaveLength(2);
    expect(got.map((r) => r.headers["webhook-id"])).toEqual(["msg_1", "msg_1"]);
    expect(got[0]!.headers.authorization).not.toBe(got[1]!.headers.authorization);
  });

  it("a receiver that refuses every token: one refresh, one re-send, then the 401 is the outcome", async () => {
    const oauth2 = new OAuth2Client(sender, { userAgent: "t" });
    refuseAll = true;
    try {
      const t0 = tokens.requests.length;
      const r0 = receiver.requests.length;
      expect(await sendWithCredentials(sender, oauth2, creds("refused"), request())).toMatchObject({ kind: "response", status: 401 });
      expect(tokens.requests.length - t0).toBe(2);
      expect(receiver.requests.length - r0).toBe(2);
    } finally {
      refuseAll = false;
    }
  });

  it("no token (the token endpoint refuses the client): nothing reaches the receiver", async () => {
    const oauth2 = new OAuth2Client(sender, { userAgent: "t" });
    const c = creds("bad-client");
    if (c.kind === "ok") c.oauth2!.clientSecret = "wrong";
    const r0 = receiver.requests.length;
    const sent = await sendWithCredentials(sender, oauth2, c, request());
    expect(sent).toMatchObject({ kind: "error", code: "HOOKLINE_OAUTH2_TOKEN", message: "token endpoint: answered 401 (invalid_client)" });
    expect(receiver.requests.length).toBe(r0);
  });

  it("missing credentials send nothing", async () => {
    const r0 = receiver.requests.length;
    const missing: ResolvedCredentials = { kind: "missing", field: "spec.headersFrom[0].secretKeyRef", reason: "SecretNotFound", message: "spec.headersFrom[0].secretKeyRef: Secret t not found" };
    expect(await sendWithCredentials(sender, new OAuth2Client(sender, { userAgent: "t" }), missing, request())).toMatchObject({ kind: "error", code: CREDENTIALS_MISSING_CODE });
    expect(receiver.requests.length).toBe(r0);
  });
});

describe("withCredentials: what plan() sees", () => {
  const missing: ResolvedCredentials = { kind: "missing", field: "spec.tls.caBundleSecretRef", reason: "SecretNotFound", message: "spec.tls.caBundleSecretRef: Secret ca not found in namespace x" };
  it("missing credentials make a delivery wait; a missing signing Secret keeps its own message", () => {
    expect(withCredentials({ kind: "ok" }, missing)).toBe(missing);
    expect(withCredentials({ kind: "none" }, missing)).toBe(missing);
    expect(withCredentials({ kind: "missing", message: "Secret s not found" }, missing)).toEqual({ kind: "missing", message: "Secret s not found" });
    expect(withCredentials({ kind: "ok" }, { kind: "ok", headers: {} })).toEqual({ kind: "ok" });
    expect(withCredentials({ kind: "none" }, undefined)).toEqual({ kind: "none" });
  });
});

describe("headerValueProblem: a Secret's value as a header value", () => {
  it.each([
    ["token-123", undefined],
    ["\tprintable ~ ascii !", undefined],
    ["x".repeat(4096), undefined],
    ["x".repeat(4097), "is 4097 characters long; a header value may have at most 4096"],
    ["token\n", "ends with a line break"],
    ["a\r\nX-Injected: 1", "has a line break at position 2"],
    ["Zoë", "has a non-ASCII character at position 3"],
    ["\u{1F511}", "has a non-ASCII character at position 1"],
    ["a\u0000b", "has a control character at position 2"],
    ["a\u007fb", "has a control character at position 2"],
  ])("%j", (value, problem) => {
    const got = headerValueProblem(value);
    if (problem === undefined) expect(got).toBeUndefined();
    else expect(got).toContain(problem);
  });
});
