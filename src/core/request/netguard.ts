// The address policy behind WEBHOOK_ALLOWED_NETWORKS: which IP addresses a webhook may connect
// to. Public addresses always; loopback, private, link-local and every other special-purpose
// range only inside an allowed CIDR. IPv4 embedded in IPv6 (mapped, NAT64, 6to4) is judged as
// the IPv4 address it reaches. Pure: the sender applies it to literals, lookups and sockets.

import { isIP } from "node:net";

export type AddressCategory =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "cgnat"
  | "ula"
  | "unspecified"
  | "multicast"
  | "reserved"
  | "documentation"
  | "benchmark"
  /** Not an IP address at all: never allowed. */
  | "invalid";

export type IpFamily = 4 | 6;

export interface Cidr {
  readonly family: IpFamily;
  /** The network address (host bits cleared) as an unsigned integer. */
  readonly network: bigint;
  readonly prefix: number;
  /** Normalised text, e.g. "10.0.0.0/8". */
  readonly text: string;
}

export type AddressCheck = { allowed: true } | { allowed: false; category: AddressCategory; reason: string };

interface Ip {
  family: IpFamily;
  value: bigint;
}

const BITS: Readonly<Record<IpFamily, number>> = { 4: 32, 6: 128 };

/**
 * Parses a comma- and/or whitespace-separated list of IPv4/IPv6 CIDRs; a bare address means
 * /32 or /128, and host bits are cleared ("10.1.2.3/8" is 10.0.0.0/8). Empty input is an empty
 * list. Throws an Error naming the first bad entry.
 */
export function parseCidrList(value: string): Cidr[] {
  return value
    .split(/[\s,]+/)
    .filter((entry) => entry !== "")
    .map(parseCidr);
}

export function parseCidr(entry: string): Cidr {
  const slash = entry.indexOf("/");
  const addressText = slash === -1 ? entry : entry.slice(0, slash);
  const prefixText = slash === -1 ? undefined : entry.slice(slash + 1);
  const ip = /[%[\]]/.test(addressText) ? undefined : parseIp(addressText);
  if (ip === undefined) {
    throw new Error(`invalid network ${JSON.stringify(entry)}: ${JSON.stringify(addressText)} is not an IPv4 or IPv6 address`);
  }
  const bits = BITS[ip.family];
  let prefix = bits;
  if (prefixText !== undefined) {
    prefix = /^[0-9]{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
    if (!(prefix >= 0 && prefix <= bits)) {
      throw new Error(`invalid network ${JSON.stringify(entry)}: the prefix length must be 0..${bits} for IPv${ip.family}`);
    }
  }
  const network = (ip.value >> BigInt(bits - prefix)) << BigInt(bits - prefix);
  return { family: ip.family, network, prefix, text: `${formatIp({ family: ip.family, value: network })}/${prefix}` };
}

/** Whether `ip` (text) is inside `cidr`. Addresses of the other family never are. */
export function cidrContains(cidr: Cidr, ip: string): boolean {
  const parsed = parseIp(ip);
  return parsed !== undefined && contains(cidr, parsed);
}

/**
 * The category of an address; for IPv4 embedded in IPv6 (::ffff:a.b.c.d, 64:ff9b::/96,
 * 2002::/16) the category of the embedded IPv4. Accepts "[v6]" and zone ids ("fe80::1%eth0").
 */
export function classifyAddress(ip: string): AddressCategory {
  const parsed = parseIp(ip);
  return parsed === undefined ? "invalid" : categoryOf(parsed);
}

/** The IPv4 address an IPv6 address reaches through mapping, NAT64 or 6to4, if any. */
export function embeddedIPv4(ip: string): string | undefined {
  const parsed = parseIp(ip);
  const inner = parsed === undefined ? undefined : unwrap(parsed);
  return inner === undefined ? undefined : formatIp(inner);
}

/**
 * The policy: public addresses are allowed; any other only inside an allowed CIDR (matched
 * against the address itself or the IPv4 it embeds, so allowing 10.0.0.0/8 also allows
 * ::ffff:10.0.0.1; an IPv6 network covers an embedded IPv4 only when written inside the same
 * embedding, see covers()). Invalid input is refused.
 */
export function checkAddress(ip: string, allowed: readonly Cidr[]): AddressCheck {
  const parsed = parseIp(ip);
  if (parsed === undefined) {
    return { allowed: false, category: "invalid", reason: `${JSON.stringify(ip)} is not an IP address` };
  }
  const category = categoryOf(parsed);
  if (category === "public") return { allowed: true };
  const inner = unwrap(parsed);
  if (allowed.some((c) => covers(c, parsed, inner))) return { allowed: true };
  const what = inner === undefined ? ip : `${ip} (IPv4 ${formatIp(inner)})`;
  return {
    allowed: false,
    category,
    reason: `${what} is not a public address (${category}); add a network containing it to WEBHOOK_ALLOWED_NETWORKS to allow it`,
  };
}

// Special-purpose ranges (IANA IPv4/IPv6 Special-Purpose Address Registries), first match wins.
const v4Ranges = table([
  ["0.0.0.0/8", "unspecified"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "cgnat"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"], // includes the cloud metadata endpoint 169.254.169.254
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "reserved"],
  ["192.0.2.0/24", "documentation"],
  ["192.88.99.0/24", "reserved"], // 6to4 relay anycast, deprecated
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmark"],
  ["198.51.100.0/24", "documentation"],
  ["203.0.113.0/24", "documentation"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"], // includes the broadcast address 255.255.255.255
]);

const v6Ranges = table([
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["::/96", "reserved"], // IPv4-compatible addresses, deprecated
  ["64:ff9b:1::/48", "reserved"], // local-use NAT64
  ["100::/64", "reserved"], // discard-only
  ["2001:2::/48", "benchmark"],
  ["2001:db8::/32", "documentation"],
  ["2001::/23", "reserved"], // IETF protocol assignments, Teredo, ORCHID
  ["3fff::/20", "documentation"],
  ["fc00::/7", "ula"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "private"], // site-local, deprecated
  ["ff00::/8", "multicast"],
]);

const globalUnicast = parseCidr("2000::/3");
const v4Mapped = parseCidr("::ffff:0:0/96");
const nat64 = parseCidr("64:ff9b::/96");
const sixToFour = parseCidr("2002::/16");

function categoryOf(ip: Ip): AddressCategory {
  const inner = unwrap(ip);
  if (inner !== undefined) return categoryOf(inner);
  const ranges = ip.family === 4 ? v4Ranges : v6Ranges;
  const hit = ranges.find(([cidr]) => contains(cidr, ip));
  if (hit) return hit[1];
  // Outside 2000::/3 nothing is allocated for global unicast.
  return ip.family === 4 || contains(globalUnicast, ip) ? "public" : "reserved";
}

/**
 * Whether an allowed network covers an address. An address that reaches an IPv4 one is judged
 * as that IPv4 address: an IPv6 network covers it only when the network lies inside the same
 * embedding (::ffff:10.0.0.0/104 is 10.0.0.0/8 written as IPv6), never through a wider IPv6
 * range: allowing ::/0 must not open ::ffff:169.254.169.254.
 */
function covers(cidr: Cidr, ip: Ip, inner: Ip | undefined): boolean {
  if (inner === undefined) return contains(cidr, ip);
  if (contains(cidr, inner)) return true;
  const embedding = [v4Mapped, nat64, sixToFour].find((e) => contains(e, ip));
  return embedding !== undefined && cidr.prefix >= embedding.prefix && contains(cidr, ip);
}

function unwrap(ip: Ip): Ip | undefined {
  if (ip.family === 4) return undefined;
  if (contains(v4Mapped, ip) || contains(nat64, ip)) return { family: 4, value: ip.value & 0xffff_ffffn };
  if (contains(sixToFour, ip)) return { family: 4, value: (ip.value >> 80n) & 0xffff_ffffn };
  return undefined;
}

function contains(cidr: Cidr, ip: Ip): boolean {
  if (cidr.family !== ip.family) return false;
  const shift = BigInt(BITS[ip.family] - cidr.prefix);
  return ip.value >> shift === cidr.network >> shift;
}

function table(rows: Array<[string, AddressCategory]>): Array<[Cidr, AddressCategory]> {
  return rows.map(([text, category]) => [parseCidr(text), category]);
}

function parseIp(input: string): Ip | undefined {
  let text = input;
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  const family = isIP(text);
  if (family === 4) {
    return { family: 4, value: text.split(".").reduce((acc, octet) => (acc << 8n) | BigInt(octet), 0n) };
  }
  if (family !== 6) return undefined;
  const zone = text.indexOf("%");
  if (zone !== -1) text = text.slice(0, zone);
  return { family: 6, value: ipv6Value(text) };
}

function ipv6Value(text: string): bigint {
  let groups = text;
  const lastColon = groups.lastIndexOf(":");
  const tail = groups.slice(lastColon + 1);
  if (tail.includes(".")) {
    // A dotted IPv4 tail ("::ffff:127.0.0.1") is the last two 16-bit groups.
    const [a = 0, b = 0, c = 0, d = 0] = tail.split(".").map(Number);
    groups = `${groups.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = groups.split("::");
  const headParts = head === "" ? [] : head.split(":");
  const restParts = rest === undefined || rest === "" ? [] : rest.split(":");
  const zeros = rest === undefined ? [] : Array<string>(8 - headParts.length - restParts.length).fill("0");
  return [...headParts, ...zeros, ...restParts].reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}

function formatIp(ip: Ip): string {
  if (ip.family === 4) {
    return [24n, 16n, 8n, 0n].map((shift) => String((ip.value >> shift) & 0xffn)).join(".");
  }
  const groups = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  // RFC 5952: compress the longest run (of two or more) of zero groups, leftmost on a tie.
  let best = { start: -1, length: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.length && j - i >= 2) best = { start: i, length: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.start === -1) return hex.join(":");
  return `${hex.slice(0, best.start).join(":")}::${hex.slice(best.start + best.length).join(":")}`;
}
