import { describe, expect, it } from "vitest";
import { NatsUrlError, parseNatsUrl, redactNatsUrl } from "./url.js";

describe("parseNatsUrl", () => {
  it.each([
    ["nats://127.0.0.1:4222", { servers: ["127.0.0.1:4222"], tls: false }],
    ["nats://nats.nats.svc", { servers: ["nats.nats.svc:4222"], tls: false }],
    ["tls://a:4222, tls://b:4223", { servers: ["a:4222", "b:4223"], tls: true }],
    ["nats://[::1]:4222", { servers: ["[::1]:4222"], tls: false }],
    ["nats://hookline:p%40ss@nats:4222", { servers: ["nats:4222"], tls: false, user: "hookline", pass: "p@ss" }],
    ["nats://s3cr3t-token@nats:4222", { servers: ["nats:4222"], tls: false, token: "s3cr3t-token" }],
    ["NATS://Nats:4222/", { servers: ["Nats:4222"], tls: false }],
  ])("%s", (text, expected) => {
    expect(parseNatsUrl(text)).toEqual(expected);
  });

  it.each([
    ["", "no URL given"],
    ["nats:4222", "not a URL"],
    ["http://nats:4222", "scheme http://"],
    ["nats://nats:4222?x=1", "no path, query or fragment"],
    ["nats://a:1,nats://u:p@b:2", "different credentials"],
  ])("refuses %j", (text, message) => {
    expect(() => parseNatsUrl(text)).toThrow(NatsUrlError);
    expect(() => parseNatsUrl(text)).toThrow(message);
  });

  it("never repeats a password or token in an error or a redacted URL", () => {
    expect(redactNatsUrl("nats://u:secret@a:1,nats://tok@b:2")).toBe("nats://u:***@a:1,nats://***@b:2");
    expect(() => parseNatsUrl("nats://u:secret@a:1/path")).toThrow(/"nats:\/\/u:\*\*\*@a:1\/path"/);
    try {
      parseNatsUrl("ftp://token123@a:1");
    } catch (err) {
      expect((err as Error).message).not.toContain("token123");
    }
  });
});

describe("redactNatsUrl", () => {
  it.each([
    // Characters a URL does not allow raw in a password: they must not end the redaction.
    ["nats://hookline:pa/ss@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:pa,ss@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:p@ss@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:p:a:ss@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:pa ss@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:пароль-密码-🔑@nats:4222", "nats://hookline:***@nats:4222"],
    ["nats://hookline:a/b,c@d:e@a:1, tls://hookline:a/b,c@d:e@b:2", "nats://hookline:***@a:1, tls://hookline:***@b:2"],
    ["nats://to/k,en@nats:4222", "nats://***@nats:4222"],
    // Percent-encoded, as a valid URL writes them.
    ["nats://hookline:pa%2Fss%2C%40@nats:4222", "nats://hookline:***@nats:4222"],
    // Not URLs at all (shown in the error that says so): still nothing after the user.
    ["hookline:secret@nats:4222", "hookline:***@nats:4222"],
    ["nats://hookline:secret", "nats://hookline:***"],
    ["nats://[::1]:secret", "nats://[::1]:***"],
    // Nothing secret: unchanged.
    ["nats://nats.nats.svc:4222,nats://[::1]:4223/", "nats://nats.nats.svc:4222,nats://[::1]:4223/"],
    ["nats:4222", "nats:4222"],
  ])("%s", (text, shown) => {
    expect(redactNatsUrl(text)).toBe(shown);
  });
});
