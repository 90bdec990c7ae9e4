/**
 * Which IP addresses a server-side download must never reach: loopback, private, link-local (cloud
 * metadata lives at 169.254.169.254), carrier-grade NAT, documentation, multicast and reserved
 * ranges, and IPv6 forms that embed such an IPv4 address. Pure functions, no I/O.
 */

type Range = readonly [base: bigint, prefix: number];

const V4_FORBIDDEN: readonly [string, number][] = [
  ["0.0.0.0", 8], // "this network"; 0.0.0.0 reaches the local host on Linux
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24],
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];

const V6_FORBIDDEN: readonly [string, number][] = [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["100::", 64], // discard-only
  ["2001:db8::", 32], // documentation
  ["fc00::", 7], // unique local (includes AWS's fd00:ec2::254 metadata)
  ["fe80::", 10], // link-local
  ["fec0::", 10], // deprecated site-local
  ["ff00::", 8], // multicast
];

function parseIpv4(text: string): bigint | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    value = (value << 8n) | BigInt(n);
  }
  return value;
}

export function parseIpv6(input: string): bigint | null {
  let text = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input;
  const zone = text.indexOf("%");
  if (zone >= 0) text = text.slice(0, zone);
  if (!/^[0-9a-fA-F:.]+$/.test(text) || !text.includes(":")) return null;

  // A trailing dotted quad (::ffff:127.0.0.1) stands for the last two groups.
  const lastColon = text.lastIndexOf(":");
  const last = text.slice(lastColon + 1);
  if (last.includes(".")) {
    const v4 = parseIpv4(last);
    if (v4 === null) return null;
    text = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }

  const halves = text.split("::");
  if (halves.length > 2) return null;
  const group = (s: string) => (s === "" ? [] : s.split(":"));
  const head = group(halves[0]!);
  const rest = halves.length === 2 ? group(halves[1]!) : [];
  const explicit = head.length + rest.length;
  if (halves.length === 1 && explicit !== 8) return null;
  if (halves.length === 2 && explicit > 7) return null;
  const groups = [...head, ...Array<string>(8 - explicit).fill("0"), ...rest];
  let value = 0n;
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    value = (value << 16n) | BigInt(parseInt(g, 16));
  }
  return value;
}

function toRanges(list: readonly [string, number][], parse: (s: string) => bigint | null): Range[] {
  return list.map(([base, prefix]) => [parse(base)!, prefix] as const);
}

const V4_RANGES = toRanges(V4_FORBIDDEN, parseIpv4);
const V6_RANGES = toRanges(V6_FORBIDDEN, parseIpv6);

function inRange(value: bigint, [base, prefix]: Range, bits: number): boolean {
  const shift = BigInt(bits - prefix);
  return value >> shift === base >> shift;
}

function forbiddenV4(value: bigint): boolean {
  return V4_RANGES.some((r) => inRange(value, r, 32));
}

/** IPv6 forms that carry an IPv4 address the packet may end up at. */
function embeddedV4(value: bigint): bigint | null {
  const high96 = value >> 32n;
  const low32 = value & 0xffffffffn;
  if (high96 === 0xffffn) return low32; // ::ffff:a.b.c.d (IPv4-mapped)
  if (high96 === 0n) return low32; // ::a.b.c.d (IPv4-compatible, deprecated)
  if (value >> 32n === 0x0064ff9b0000000000000000n) return low32; // 64:ff9b::/96 NAT64
  if (value >> 112n === 0x2002n) return (value >> 80n) & 0xffffffffn; // 6to4
  return null;
}

/** True when the address is not a public unicast address. Unparseable input counts as forbidden. */
export function isForbiddenAddress(address: string): boolean {
  const v4 = parseIpv4(address);
  if (v4 !== null) return forbiddenV4(v4);
  const v6 = parseIpv6(address);
  if (v6 === null) return true;
  if (V6_RANGES.some((r) => inRange(v6, r, 128))) return true;
  const inner = embeddedV4(v6);
  return inner !== null && forbiddenV4(inner);
}

/** True for a literal IP host as it appears in a URL (IPv6 in brackets). */
export function isIpLiteral(host: string): boolean {
  return parseIpv4(host) !== null || parseIpv6(host) !== null;
}

const V4_LOOPBACK = parseIpv4("127.0.0.0")!;
const V4_MAPPED_PREFIX = 0xffffn;

/**
 * The IPv4 address a literal reaches, whatever its spelling: a dotted quad itself, and an IPv6
 * literal that is IPv4-mapped (::ffff:127.0.0.1, which a dual-stack socket binds as 127.0.0.1).
 */
function reachedV4(address: string): bigint | null {
  const v4 = parseIpv4(address);
  if (v4 !== null) return v4;
  const v6 = parseIpv6(address);
  return v6 !== null && v6 >> 32n === V4_MAPPED_PREFIX ? v6 & 0xffffffffn : null;
}

/** Whether an IP literal is loopback however written (127.0.0.0/8, ::1 in any spelling, IPv4-mapped 127/8); false for anything else. */
export function isLoopbackAddress(address: string): boolean {
  const v4 = reachedV4(address);
  if (v4 !== null) return inRange(v4, [V4_LOOPBACK, 8], 32);
  return parseIpv6(address) === 1n;
}

/** Whether an IP literal is the unspecified address (every interface) however written: 4 for 0.0.0.0, 6 for ::, else undefined. */
export function unspecifiedAddressFamily(address: string): 4 | 6 | undefined {
  if (parseIpv4(address) === 0n) return 4;
  return parseIpv6(address) === 0n ? 6 : undefined;
}
