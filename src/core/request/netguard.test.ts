import { describe, it, expect } from "vitest";
import { checkAddress, cidrContains, classifyAddress, embeddedIPv4, parseCidr, parseCidrList, type AddressCategory } from "./netguard.js";

describe("parseCidrList", () => {
  const table: Array<[string, string[]]> = [
    ["", []],
    ["   ", []],
    ["127.0.0.0/8,::1/128,10.0.0.0/8", ["127.0.0.0/8", "::1/128", "10.0.0.0/8"]],
    ["10.0.0.0/8, 192.168.0.0/16", ["10.0.0.0/8", "192.168.0.0/16"]],
    ["10.0.0.0/8 192.168.0.0/16\n172.16.0.0/12", ["10.0.0.0/8", "192.168.0.0/16", "172.16.0.0/12"]],
    [",10.0.0.0/8,,", ["10.0.0.0/8"]],
    ["10.1.2.3", ["10.1.2.3/32"]],
    ["::1", ["::1/128"]],
    ["fd00::/8", ["fd00::/8"]],
    ["10.1.2.3/8", ["10.0.0.0/8"]],
    ["0.0.0.0/0", ["0.0.0.0/0"]],
    ["::/0", ["::/0"]],
    ["2001:DB8:0:0:1::/64", ["2001:db8::/64"]],
    ["::ffff:10.0.0.0/104", ["::ffff:a00:0/104"]],
    ["fe80::1:0:0:1/128", ["fe80::1:0:0:1/128"]],
    ["1:0:0:1:0:0:0:1", ["1:0:0:1::1/128"]],
  ];

  it.each(table)("%j -> %j", (input, expected) => {
    expect(parseCidrList(input).map((c) => c.text)).toEqual(expected);
  });

  it.each([
    ["10.0.0.0/33", /"10.0.0.0\/33".*0\.\.32/],
    ["::/129", /"::\/129".*0\.\.128/],
    ["10.0.0.0/", /"10.0.0.0\/"/],
    ["10.0.0.0/-1", /"10.0.0.0\/-1"/],
    ["10.0.0.0/+8", /"10.0.0.0\/\+8"/],
    ["10.0.0.0/8/8", /"10.0.0.0\/8\/8"/],
    ["10.0.0.0/0x8", /"10.0.0.0\/0x8"/],
    ["10.0.0/8", /"10.0.0\/8".*not an IPv4 or IPv6 address/],
    ["010.0.0.0/8", /"010.0.0.0\/8"/],
    ["256.0.0.0/8", /"256.0.0.0\/8"/],
    ["localhost", /"localhost"/],
    ["fe80::1%eth0/64", /"fe80::1%eth0\/64"/],
    ["[::1]/128", /"\[::1\]\/128"/],
    ["10.0.0.0/8;11.0.0.0/8", /"10.0.0.0\/8;11.0.0.0\/8"/],
  ])("refuses %j naming the entry", (input, message) => {
    expect(() => parseCidrList(`127.0.0.1, ${input}`)).toThrow(message);
  });
});

describe("classifyAddress", () => {
  const table: Array<[string, AddressCategory]> = [
    ["8.8.8.8", "public"],
    ["1.1.1.1", "public"],
    ["93.184.216.34", "public"],
    ["11.0.0.1", "public"],
    ["172.15.255.255", "public"],
    ["172.32.0.0", "public"],
    ["100.63.255.255", "public"],
    ["100.128.0.0", "public"],
    ["169.253.255.255", "public"],
    ["192.169.0.0", "public"],
    ["223.255.255.255", "public"],
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["172.16.5.4", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "cgnat"],
    ["100.127.255.255", "cgnat"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["192.0.0.170", "reserved"],
    ["192.0.2.1", "documentation"],
    ["198.51.100.7", "documentation"],
    ["203.0.113.9", "documentation"],
    ["198.18.0.1", "benchmark"],
    ["198.19.255.255", "benchmark"],
    ["192.88.99.1", "reserved"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.255", "reserved"],
    ["2001:4860:4860::8888", "public"],
    ["2606:4700:4700::1111", "public"],
    ["2a00:1450:4001:82a::200e", "public"],
    ["::", "unspecified"],
    ["0:0:0:0:0:0:0:0", "unspecified"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["[::1]", "loopback"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["febf:ffff::1", "link-local"],
    ["fec0::1", "private"],
    ["fc00::1", "ula"],
    ["fd12::1", "ula"],
    ["fdff:ffff::1", "ula"],
    ["ff02::1", "multicast"],
    ["ff05::1:3", "multicast"],
    ["2001:db8::1", "documentation"],
    ["3fff::1", "documentation"],
    ["2001:2::1", "benchmark"],
    ["2001::1", "reserved"], // Teredo
    ["2001:20::1", "reserved"], // ORCHIDv2
    ["100::1", "reserved"],
    ["64:ff9b:1::1", "reserved"],
    ["::2", "reserved"],
    ["::7f00:1", "reserved"], // IPv4-compatible, deprecated
    ["1::1", "reserved"], // outside 2000::/3
    ["4000::1", "reserved"],
    ["5f00::1", "reserved"],
    // IPv4-mapped: judged as the IPv4 inside
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::FFFF:7F00:0001", "loopback"],
    ["0:0:0:0:0:ffff:7f00:1", "loopback"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "link-local"],
    ["::ffff:a9fe:a9fe", "link-local"],
    ["::ffff:0.0.0.0", "unspecified"],
    ["::ffff:8.8.8.8", "public"],
    ["[::ffff:127.0.0.1]", "loopback"],
    // NAT64 (64:ff9b::/96)
    ["64:ff9b::7f00:1", "loopback"],
    ["64:ff9b::10.0.0.1", "private"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["64:ff9b::808:808", "public"],
    // 6to4 (2002::/16), IPv4 in bits 16..47
    ["2002:7f00:1::1", "loopback"],
    ["2002:a00:1::", "private"],
    ["2002:a9fe:a9fe::1", "link-local"],
    ["2002:c0a8:101:1::1", "private"],
    ["2002:808:808::1", "public"],
    // not addresses
    ["", "invalid"],
    ["localhost", "invalid"],
    ["010.0.0.1", "invalid"],
    ["1.2.3", "invalid"],
    ["0x7f.0.0.1", "invalid"],
    ["2130706433", "invalid"],
    ["1::2::3", "invalid"],
    [" 8.8.8.8", "invalid"],
    ["::1/128", "invalid"],
  ];

  it.each(table)("%j is %s", (ip, category) => {
    expect(classifyAddress(ip)).toBe(category);
  });
});

describe("embeddedIPv4", () => {
  it.each([
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["::ffff:7f00:1", "127.0.0.1"],
    ["64:ff9b::a9fe:a9fe", "169.254.169.254"],
    ["2002:c0a8:101::1", "192.168.1.1"],
    ["::1", undefined],
    ["fe80::1", undefined],
    ["10.0.0.1", undefined],
    ["garbage", undefined],
  ])("%j -> %j", (ip, expected) => {
    expect(embeddedIPv4(ip)).toBe(expected);
  });
});

describe("checkAddress", () => {
  const none = parseCidrList("");
  const lab = parseCidrList("127.0.0.0/8,::1/128,10.0.0.0/8");
  const table: Array<[string, boolean, boolean, AddressCategory]> = [
    // ip, allowed with no list, allowed with the lab list, category when refused
    ["169.254.169.254", false, false, "link-local"],
    ["10.0.0.1", false, true, "private"],
    ["10.200.3.4", false, true, "private"],
    ["172.16.5.4", false, false, "private"],
    ["192.168.1.1", false, false, "private"],
    ["100.64.0.1", false, false, "cgnat"],
    ["127.0.0.1", false, true, "loopback"],
    ["127.1.2.3", false, true, "loopback"],
    ["::1", false, true, "loopback"],
    ["fe80::1", false, false, "link-local"],
    ["fc00::1", false, false, "ula"],
    ["fd12::1", false, false, "ula"],
    ["::ffff:10.0.0.1", false, true, "private"],
    ["::ffff:a00:1", false, true, "private"],
    ["::ffff:127.0.0.1", false, true, "loopback"],
    ["::ffff:7f00:1", false, true, "loopback"],
    ["64:ff9b::a00:1", false, true, "private"],
    ["2002:a00:1::1", false, true, "private"],
    ["::ffff:192.168.1.1", false, false, "private"],
    ["::ffff:169.254.169.254", false, false, "link-local"],
    ["0.0.0.0", false, false, "unspecified"],
    ["::", false, false, "unspecified"],
    ["224.0.0.1", false, false, "multicast"],
    ["ff02::1", false, false, "multicast"],
    ["255.255.255.255", false, false, "reserved"],
    ["192.0.2.1", false, false, "documentation"],
    ["198.18.0.1", false, false, "benchmark"],
    ["8.8.8.8", true, true, "public"],
    ["::ffff:8.8.8.8", true, true, "public"],
    ["2001:4860:4860::8888", true, true, "public"],
    ["not-an-ip", false, false, "invalid"],
  ];

  it.each(table)("%j: allowed without a list = %s, with 127.0.0.0/8,::1/128,10.0.0.0/8 = %s", (ip, withoutList, withLab, category) => {
    for (const [list, expected] of [
      [none, withoutList],
      [lab, withLab],
    ] as const) {
      const result = checkAddress(ip, list);
      if (expected) {
        expect(result).toEqual({ allowed: true });
      } else {
        expect(result).toMatchObject({ allowed: false, category });
        if (!result.allowed) {
          expect(result.reason).toContain(ip);
          if (category !== "invalid") expect(result.reason).toContain("WEBHOOK_ALLOWED_NETWORKS");
        }
      }
    }
  });

  it("names the embedded IPv4 in the reason", () => {
    const result = checkAddress("::ffff:7f00:1", none);
    expect(result).toMatchObject({ allowed: false, category: "loopback" });
    expect(!result.allowed && result.reason).toContain("IPv4 127.0.0.1");
  });

  it.each([
    ["169.254.169.254", "169.254.169.254/32", true],
    ["169.254.169.253", "169.254.169.254/32", false],
    ["fd12::1", "fd00::/8", true],
    ["fe80::1%eth0", "fe80::/10", true],
    ["::ffff:10.0.0.1", "::ffff:10.0.0.0/104", true],
    ["10.0.0.1", "::ffff:10.0.0.0/104", false], // an IPv6 network does not cover a plain IPv4 address
    ["8.8.8.8", "10.0.0.0/8", true], // public stays allowed whatever the list
    ["192.168.1.1", "0.0.0.0/0", true],
    ["fd12::1", "0.0.0.0/0", false],
    ["fd12::1", "::/0", true],
    ["::ffff:169.254.169.254", "::/0", false], // an embedded IPv4 is judged as IPv4: ::/0 is not 0.0.0.0/0
    ["64:ff9b::a00:1", "::/0", false],
    ["2002:a00:1::1", "::/0", false],
    ["64:ff9b::a00:1", "64:ff9b::/96", true], // an IPv4 range written in the same embedding
    ["127.0.0.1", "::1/128", false],
    ["::1", "127.0.0.0/8", false],
  ])("%j against %j: %s", (ip, list, expected) => {
    expect(checkAddress(ip, parseCidrList(list)).allowed).toBe(expected);
  });
});

describe("cidrContains", () => {
  it.each([
    ["10.0.0.0/8", "10.255.255.255", true],
    ["10.0.0.0/8", "11.0.0.0", false],
    ["172.16.0.0/12", "172.31.0.1", true],
    ["172.16.0.0/12", "172.32.0.1", false],
    ["0.0.0.0/0", "255.255.255.255", true],
    ["0.0.0.0/0", "::1", false],
    ["2001:db8::/32", "2001:db8:ffff::1", true],
    ["2001:db8::/32", "2001:db9::1", false],
    ["10.0.0.1", "10.0.0.1", true],
    ["10.0.0.1", "10.0.0.2", false],
    ["10.0.0.0/8", "garbage", false],
  ])("%s contains %s: %s", (cidr, ip, expected) => {
    expect(cidrContains(parseCidr(cidr), ip)).toBe(expected);
  });
});
