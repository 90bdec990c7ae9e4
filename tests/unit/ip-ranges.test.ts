import { describe, expect, test } from "bun:test";
import { isForbiddenAddress, parseIpv6 } from "../../common/ip-ranges.ts";

describe("isForbiddenAddress", () => {
  test.each([
    "127.0.0.1",
    "127.255.255.254",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "[::1]",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",
    "64:ff9b::10.0.0.1",
    "2002:c0a8:0101::1",
    "fd00:ec2::254",
    "fc00::1",
    "fe80::1%eth0",
    "ff02::1",
    "2001:db8::1",
    "not-an-ip",
    "1.2.3",
    "1.2.3.256",
  ])("%s is refused", (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  test.each(["93.184.215.14", "8.8.8.8", "172.32.0.1", "192.169.0.1", "2606:4700::6810:84e5", "::ffff:8.8.8.8", "2002:0808:0808::1"])(
    "%s is a public address",
    (address) => {
      expect(isForbiddenAddress(address)).toBe(false);
    },
  );
});

describe("parseIpv6", () => {
  test.each([
    ["::1", 1n],
    ["::", 0n],
    ["::ffff:127.0.0.1", 0xffff7f000001n],
    ["1:2:3:4:5:6:7:8", 0x00010002000300040005000600070008n],
    ["1::8", 0x00010000000000000000000000000008n],
  ])("%s parses to the right 128-bit value", (text, value) => {
    expect(parseIpv6(text)).toBe(value);
  });

  test.each(["1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "g::1", "1.2.3.4"])("%s is not an IPv6 address", (text) => {
    expect(parseIpv6(text)).toBeNull();
  });
});
