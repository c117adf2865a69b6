// For any list of NATS URLs with any user, password and token (every character, written raw or
// percent-encoded), redactNatsUrl shows the list with each password and token replaced by "***"
// and nothing else changed: no password survives it, whatever it holds.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { redactNatsUrl } from "./url.js";

// A comma followed by a scheme starts the next URL of a list: a secret that holds one reads as
// two URLs (it has to be percent-encoded, %2C, to be one); so does a user name with a colon.
const NEXT_URL = /,\s*[a-z][a-z0-9+.-]*:\/\//i;
// Every character, biased towards the ones that end a URL part.
const secret = fc
  .oneof(fc.string({ unit: "binary", minLength: 1, maxLength: 40 }), fc.stringMatching(/^[/,@: %?#a-z\u00e9\u{1F511}]{1,20}$/u))
  .filter((s) => !NEXT_URL.test(s));
const user = fc.oneof(fc.constantFrom("hookline", "u", "operator"), fc.string({ unit: "binary", minLength: 1, maxLength: 20 })).filter((s) => !s.includes(":") && !NEXT_URL.test(s));
const host = fc.oneof(fc.constantFrom("nats", "nats.nats.svc", "127.0.0.1", "[::1]"), fc.stringMatching(/^[a-z0-9][a-z0-9.-]{0,15}$/));
const scheme = fc.constantFrom("nats", "tls", "NATS");
const port = fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined });
const encoded = fc.boolean();

interface Entry {
  text: string;
  shown: string;
  secret: string | undefined;
}

const entry: fc.Arbitrary<Entry> = fc.oneof(
  fc.record({ scheme, user, pass: secret, host, port, encoded }).map(({ scheme, user, pass, host, port, encoded }) => {
    const hp = `${host}${port === undefined ? "" : `:${port}`}`;
    const p = encoded ? encodeURIComponent(pass) : pass;
    return { text: `${scheme}://${user}:${p}@${hp}`, shown: `${scheme}://${user}:***@${hp}`, secret: p };
  }),
  fc.record({ scheme, token: secret.filter((t) => !t.includes(":")), host, port, encoded }).map(({ scheme, token, host, port, encoded }) => {
    const hp = `${host}${port === undefined ? "" : `:${port}`}`;
    const t = encoded ? encodeURIComponent(token) : token;
    return { text: `${scheme}://${t}@${hp}`, shown: `${scheme}://***@${hp}`, secret: t };
  }),
  fc.record({ scheme, host, port }).map(({ scheme, host, port }) => {
    const text = `${scheme}://${host}${port === undefined ? "" : `:${port}`}`;
    return { text, shown: text, secret: undefined };
  }),
);

describe("redactNatsUrl (property)", () => {
  it("replaces every password and token of any list by *** and changes nothing else", () => {
    fc.assert(
      fc.property(fc.array(entry, { minLength: 1, maxLength: 4 }), fc.constantFrom(",", ", "), (entries, sep) => {
        const text = entries.map((e) => e.text).join(sep);
        const shown = redactNatsUrl(text);
        expect(shown).toBe(entries.map((e) => e.shown).join(sep));
        const skeleton = entries.map((e) => e.shown).join(sep);
        // Said plainly: no secret is in what is shown, unless the rest of the text holds it too (a one-letter password "a" and host "nats").
        for (const e of entries) if (e.secret !== undefined && !skeleton.includes(e.secret)) expect(shown).not.toContain(e.secret);
      }),
      { numRuns: 2_000 },
    );
  });
});
