import { isLoopbackAddress, unspecifiedAddressFamily } from "./ip-ranges.ts";

/**
 * What a listening server tells the person who started it: the address it actually bound, and a URL
 * that reaches it from this machine (a wildcard address is not one a browser or curl can open).
 */

/** The address a browser or curl on this machine opens for a server bound to every interface. */
const WILDCARD_LOCAL = { 4: "127.0.0.1", 6: "::1" } as const;

/**
 * Names that are loopback without asking DNS: `localhost` and names under it (RFC 6761), and the
 * IPv6 loopback names every Debian-family /etc/hosts carries.
 */
const LOOPBACK_NAMES = new Set(["localhost", "ip6-localhost", "ip6-loopback"]);

function hostPart(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * Whether a listening host is loopback, by what it is rather than how it is spelt: an IP literal by
 * its parsed address (`0:0:0:0:0:0:0:1`, `::ffff:127.0.0.1`, `127.0.0.2`), a name by the names that
 * are loopback everywhere, in any case. Any other name counts as a network one.
 */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase();
  return isLoopbackAddress(name) || LOOPBACK_NAMES.has(name) || name.endsWith(".localhost");
}

export interface ListenAddress {
  /** `host:port` as bound. */
  bound: string;
  /** `http://…` that reaches the server from this machine. */
  url: string;
  /** Whether other machines can reach it (a wildcard or a non-loopback address). */
  network: boolean;
}

export function listenAddress(hostname: string, port: number): ListenAddress {
  const wildcard = unspecifiedAddressFamily(hostname);
  const local = wildcard ? WILDCARD_LOCAL[wildcard] : hostname;
  return { bound: `${hostPart(hostname)}:${port}`, url: `http://${hostPart(local)}:${port}`, network: !isLoopbackHost(hostname) };
}

/**
 * The FILE_URL_ALLOWED_HOSTS entry (`host:port`, the port always written) under which a server
 * listening on loopback may download files it serves itself; none on a network address, where no
 * address policy is loosened.
 */
export function selfFileHost(hostname: string, port: number): string | undefined {
  const { network, url } = listenAddress(hostname, port);
  return network ? undefined : `${new URL(url).hostname}:${port}`;
}
