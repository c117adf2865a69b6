// Properties of the address policy: CIDRs round trip through their normalised text; an address
// is allowed iff it is public or inside an allowed CIDR (itself or the IPv4 it embeds);
// ::ffff:a.b.c.d is judged exactly as a.b.c.d; loopback, private, link-local (and so the
// metadata endpoint 169.254.169.254) are refused by default; and no string is allowed unless it
// is an IP address that classifies as public or sits in an allowed network.
import { isIP } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkAddress, cidrContains, classifyAddress, embeddedIPv4, parseCidr, parseCidrList, type Cidr } from "./netguard.js";

const u32 = fc.integer({ min: 0, max: 0xffff_ffff });
const v4Text = (n: number) => [24, 16, 8, 0].map((s) => String((n >>> s) & 0xff)).join(".");
const v4Arb = fc.oneof(u32.map(v4Text), fc.ipV4());
const v6Arb = fc.oneof(
  fc.ipV6(),
  fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(":")),
);
const anyIpArb = fc.oneof(v4Arb, v6Arb);
const cidrTextArb = fc.oneof(
  fc.tuple(v4Arb, fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`),
  fc.tuple(v6Arb, fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`),
  anyIpArb,
);
const cidrListArb = fc.array(cidrTextArb, { maxLength: 4 }).map((list) => parseCidrList(list.join(",")));

/** The ranges the contract says are refused unless allowed, as generators of addresses inside them. */
const inRange = (cidr: string) => {
  const c = parseCidr(cidr);
  const hostBits = (c.family === 4 ? 32 : 128) - c.prefix;
  return fc.bigInt({ min: 0n, max: (1n << BigInt(hostBits)) - 1n }).map((host) => formatValue(c.family, c.network | host));
};
function formatValue(family: 4 | 6, value: bigint): string {
  if (family === 4) return v4Text(Number(value));
  return Array.from({ length: 8 }, (_, i) => ((value >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(":");
}
const blockedByDefault = fc.oneof(
  inRange("127.0.0.0/8"),
  inRange("10.0.0.0/8"),
  inRange("172.16.0.0/12"),
  inRange("192.168.0.0/16"),
  inRange("169.254.0.0/16"),
  inRange("100.64.0.0/10"),
  inRange("0.0.0.0/8"),
  inRange("fe80::/10"),
  inRange("fc00::/7"),
  fc.constantFrom("::1", "::", "169.254.169.254", "[::1]", "fe80::1%eth0"),
);

/** The IPv6 blocks that embed an IPv4 address (mapped, NAT64, 6to4). */
const embeddings = parseCidrList("::ffff:0:0/96, 64:ff9b::/96, 2002::/16");

/**
 * The policy written from the contract: public, or inside an allowed network. An address that
 * embeds an IPv4 one is that IPv4 address: an IPv4 network covering it, or an IPv6 network that
 * is an IPv4 range written inside the same embedding (never a wider IPv6 range such as ::/0).
 */
function allowedByDefinition(ip: string, allowed: readonly Cidr[]): boolean {
  if (classifyAddress(ip) === "public") return true;
  const inner = embeddedIPv4(ip);
  if (inner === undefined) return allowed.some((c) => cidrContains(c, ip));
  const embedding = embeddings.find((e) => cidrContains(e, ip))!;
  return allowed.some((c) => cidrContains(c, inner) || (c.prefix >= embedding.prefix && cidrContains(c, ip)));
}

describe("netguard (properties)", () => {
  it("a CIDR's normalised text parses back to the same CIDR, which contains the address it was written with", () => {
    fc.assert(
      fc.property(cidrTextArb, (text) => {
        const c = parseCidr(text);
        expect(parseCidr(c.text)).toEqual(c);
        expect(parseCidrList(`${c.text}, ${text}`)).toEqual([c, c]);
        expect(cidrContains(c, text.split("/")[0]!)).toBe(true);
        // Host bits are cleared.
        const bits = BigInt((c.family === 4 ? 32 : 128) - c.prefix);
        expect((c.network >> bits) << bits).toBe(c.network);
      }),
    );
  });

  it("an address is allowed iff it is public or inside an allowed CIDR (itself or its embedded IPv4)", () => {
    fc.assert(
      fc.property(fc.oneof(anyIpArb, blockedByDefault), cidrListArb, (ip, allowed) => {
        expect(checkAddress(ip, allowed).allowed).toBe(allowedByDefinition(ip, allowed));
      }),
    );
  });

  it("::ffff:a.b.c.d (dotted or hex) is classified, embedded and allowed exactly like a.b.c.d", () => {
    fc.assert(
      fc.property(u32, cidrListArb, fc.array(fc.integer({ min: 0, max: 32 }).chain((p) => u32.map((n) => `${v4Text(n)}/${p}`)), { maxLength: 3 }), (n, lists, v4Cidrs) => {
        const v4 = v4Text(n);
        const allowed = [...lists, ...parseCidrList(v4Cidrs.join(","))];
        for (const mapped of [`::ffff:${v4}`, `::ffff:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`, `0:0:0:0:0:ffff:${v4}`, `[::ffff:${v4}]`]) {
          expect(classifyAddress(mapped)).toBe(classifyAddress(v4));
          expect(embeddedIPv4(mapped)).toBe(v4);
          expect(checkAddress(mapped, allowed).allowed).toBe(checkAddress(v4, allowed).allowed);
        }
      }),
    );
  });

  it("loopback, private, link-local, CGNAT, unspecified and the metadata endpoint are refused by default, in every spelling", () => {
    fc.assert(
      fc.property(blockedByDefault, (ip) => {
        expect(checkAddress(ip, []).allowed).toBe(false);
        const inner = isIP(ip) === 4 ? ip : undefined;
        if (inner) {
          expect(checkAddress(`::ffff:${inner}`, []).allowed).toBe(false);
          expect(checkAddress(`64:ff9b::${inner}`, []).allowed).toBe(false);
        }
      }),
    );
  });

  it("an allowed network opens exactly the addresses inside it (and their mapped forms)", () => {
    fc.assert(
      fc.property(blockedByDefault, (ip) => {
        const bare = ip.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
        const own = parseCidrList(bare);
        expect(checkAddress(ip, own).allowed).toBe(true);
        if (isIP(bare) === 4) expect(checkAddress(`::ffff:${bare}`, own).allowed).toBe(true);
      }),
    );
  });

  it("no string is allowed by accident: anything allowed is an IP address that is public or in an allowed network", () => {
    const junk = fc.oneof(
      fc.string(),
      fc.string({ unit: "binary", maxLength: 50 }),
      fc.stringMatching(/^[0-9a-fA-F:.%[\]/ x]{0,45}$/),
      fc.ipV4Extended(), // octal and hex octets, short forms: not addresses to us
      fc.tuple(anyIpArb, fc.string({ maxLength: 3 })).map(([ip, s]) => ip + s),
      fc.tuple(fc.string({ maxLength: 3 }), anyIpArb).map(([s, ip]) => s + ip),
    );
    fc.assert(
      fc.property(junk, fc.constantFrom([], parseCidrList("10.0.0.0/8,::1")), (s, allowed) => {
        const result = checkAddress(s, allowed);
        const bare = s.startsWith("[") && s.endsWith("]") ? s.slice(1, -1) : s;
        if (isIP(bare) === 0) {
          expect(result).toMatchObject({ allowed: false, category: "invalid" });
          expect(classifyAddress(s)).toBe("invalid");
        } else {
          expect(classifyAddress(s)).not.toBe("invalid");
          expect(result.allowed).toBe(allowedByDefinition(s, allowed));
        }
        // The same string always gets the same answer.
        expect(checkAddress(s, allowed)).toEqual(result);
      }),
      { numRuns: 500 },
    );
  });

  it("parseCidrList either refuses a string or returns CIDRs that round trip", () => {
    const junk = fc.oneof(fc.string(), fc.stringMatching(/^[0-9a-f:./, ]{0,40}$/), fc.array(cidrTextArb, { maxLength: 3 }).map((l) => l.join(" , ")));
    fc.assert(
      fc.property(junk, (s) => {
        let list: Cidr[];
        try {
          list = parseCidrList(s);
        } catch (e) {
          expect((e as Error).message).toMatch(/^invalid network /);
          return;
        }
        for (const c of list) expect(parseCidr(c.text)).toEqual(c);
      }),
      { numRuns: 300 },
    );
  });
});
