import { createConnection, createServer, type Server, type Socket } from "node:net";
import { answerHelp, option } from "./support.ts";

/**
 * A TCP proxy on loopback that puts a network between a client and a service: every chunk is held
 * for half of `roundTripMs` on its way in each direction, so each exchange (a request and its answer)
 * takes one round trip longer, as a Neon or Upstash endpoint does seen from an edge location. Order
 * is kept (chunks of one direction are held for the same time). Protocol-agnostic: Postgres, Redis,
 * HTTP and WebSocket alike.
 *
 * It also counts round trips: a burst from the client that follows an answer (or opens the
 * connection) is one, however many commands it carries, so a pipeline of ten commands counts once
 * and ten commands awaited one after another count ten.
 *
 * Also a command, to put a service a network away by hand (and see its round trips on Ctrl-C):
 *
 *   bun bench/latency-proxy.ts --target 127.0.0.1:5432 --ms 8
 */

export interface LatencyProxy {
  /** `127.0.0.1:{port}`. */
  readonly address: string;
  readonly port: number;
  /** Round trips so far, over every connection. */
  roundTrips(): number;
  /** Connections opened so far. */
  connections(): number;
  stop(): Promise<void>;
}

export async function startLatencyProxy(target: { host: string; port: number }, roundTripMs: number): Promise<LatencyProxy> {
  const oneWay = roundTripMs / 2;
  let roundTrips = 0;
  let connections = 0;
  const open = new Set<Socket>();
  const relay = (from: Socket, to: Socket, onChunk: () => void) => {
    from.on("data", (chunk) => {
      onChunk();
      setTimeout(() => to.destroyed || to.write(chunk), oneWay);
    });
    from.on("end", () => setTimeout(() => to.end(), oneWay));
    from.on("error", () => to.destroy());
    from.on("close", () => setTimeout(() => to.destroy(), oneWay));
  };
  const server: Server = createServer((client) => {
    connections++;
    const upstream = createConnection(target);
    open.add(client).add(upstream);
    client.on("close", () => open.delete(client));
    upstream.on("close", () => open.delete(upstream));
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // Whether the service has answered since the client last sent: the next client burst is a new round trip.
    let answered = true;
    relay(client, upstream, () => {
      if (answered) roundTrips++;
      answered = false;
    });
    relay(upstream, client, () => {
      answered = true;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    roundTrips: () => roundTrips,
    connections: () => connections,
    async stop() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `url` with its host and port replaced by the proxy's (a connection string or an http URL). */
export function throughProxy(url: string, proxy: LatencyProxy): string {
  const parsed = new URL(url);
  parsed.hostname = "127.0.0.1";
  parsed.port = String(proxy.port);
  return parsed.toString().replace(/\/$/, url.endsWith("/") ? "/" : "");
}

if (import.meta.main) {
  const USAGE = "usage: bun bench/latency-proxy.ts --target <host:port> --ms <round trip>\n\nListens on a free loopback port and forwards to the target, each exchange a round trip slower; prints its address, and the round trips it counted on Ctrl-C.";
  answerHelp(USAGE);
  const [host, port] = (option("--target") ?? "").split(":");
  const ms = Number(option("--ms") ?? "NaN");
  if (!host || !port || !Number.isFinite(ms) || ms < 0) {
    console.error(USAGE);
    process.exit(2);
  }
  const proxy = await startLatencyProxy({ host, port: Number(port) }, ms);
  console.log(`${proxy.address} → ${host}:${port}, +${ms} ms per round trip`);
  process.on("SIGINT", () => {
    console.log(`${proxy.roundTrips()} round trips over ${proxy.connections()} connections`);
    process.exit(0);
  });
}
