import type { Server, ServerWebSocket, Socket } from "bun";

/**
 * A WebSocket-to-TCP proxy speaking the protocol of Neon's serverless driver: the driver opens
 * `ws://{proxy}?address={host}:{port}` and sends raw Postgres wire bytes as binary messages. Tests use
 * it to run the Neon adapter against the local Postgres. Only loopback targets are forwarded.
 */

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

interface Link {
  target: { hostname: string; port: number };
  tcp?: Socket<undefined>;
  /** Bytes from the WebSocket not yet accepted by the TCP socket (before it connects, or under backpressure). */
  backlog: Uint8Array[];
  closed: boolean;
}

export interface WsTcpBridge {
  /** What to give the driver as its wsProxy: `127.0.0.1:{port}`. */
  readonly address: string;
  stop(): Promise<void>;
}

function parseTarget(address: string | null): Link["target"] | undefined {
  const match = /^(.+):(\d{1,5})$/.exec(address ?? "");
  if (!match || !LOOPBACK_HOSTS.has(match[1]!)) return undefined;
  return { hostname: match[1]!.replace(/^\[(.*)\]$/, "$1"), port: Number(match[2]) };
}

function flush(link: Link): void {
  while (link.tcp && link.backlog.length > 0) {
    const chunk = link.backlog[0]!;
    const written = link.tcp.write(chunk);
    if (written < chunk.byteLength) {
      link.backlog[0] = chunk.subarray(Math.max(written, 0));
      return;
    }
    link.backlog.shift();
  }
}

/** Starts the bridge on a random loopback port. */
export function startWsTcpBridge(): WsTcpBridge {
  const sockets = new Set<ServerWebSocket<Link>>();
  const server: Server<Link> = Bun.serve<Link>({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, srv) {
      const target = parseTarget(new URL(req.url).searchParams.get("address"));
      if (!target) return new Response("address must be a loopback host:port", { status: 400 });
      if (srv.upgrade(req, { data: { target, backlog: [], closed: false } })) return undefined;
      return new Response("WebSocket upgrade required", { status: 426 });
    },
    websocket: {
      async open(ws) {
        sockets.add(ws);
        const link = ws.data;
        try {
          link.tcp = await Bun.connect({
            hostname: link.target.hostname,
            port: link.target.port,
            socket: {
              data: (_socket, chunk) => {
                if (!link.closed) ws.sendBinary(chunk);
              },
              drain: () => flush(link),
              close: () => ws.close(),
              error: () => ws.close(),
            },
          });
          if (link.closed) link.tcp.end();
          else flush(link);
        } catch {
          ws.close(1011, "cannot reach the target");
        }
      },
      message(ws, message) {
        ws.data.backlog.push(typeof message === "string" ? new TextEncoder().encode(message) : message);
        flush(ws.data);
      },
      close(ws) {
        sockets.delete(ws);
        ws.data.closed = true;
        ws.data.tcp?.end();
      },
    },
  });
  return {
    address: `127.0.0.1:${server.port}`,
    async stop() {
      for (const ws of sockets) ws.close();
      await server.stop(true);
    },
  };
}
