/**
 * What a listening server tells the person who started it: the address it actually bound, and a URL
 * that reaches it from this machine (a wildcard address is not one a browser or curl can open).
 */

const WILDCARDS: Record<string, string> = { "0.0.0.0": "127.0.0.1", "::": "::1" };

function hostPart(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
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
  const local = WILDCARDS[hostname] ?? hostname;
  const loopback = hostname === "localhost" || hostname === "::1" || hostname.startsWith("127.");
  return { bound: `${hostPart(hostname)}:${port}`, url: `http://${hostPart(local)}:${port}`, network: !loopback };
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
