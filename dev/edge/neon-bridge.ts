import type { Server, ServerWebSocket, Socket } from "bun";
import { Client, DatabaseError, Pool, type ClientConfig, type FieldDef } from "@neondatabase/serverless";

/**
 * Neon's proxy in front of a local Postgres (a real server, or PGlite served by pglite-server.ts),
 * speaking both protocols of Neon's serverless driver, so that the Neon adapter (the edge API's, and
 * the tests') runs against a local database:
 * - WebSocket: the driver opens `ws://{proxy}?address={host}:{port}` and sends raw Postgres wire bytes
 *   as binary messages, forwarded over TCP. Only loopback targets are forwarded.
 * - HTTP (`POST /sql`, the driver's `neon()` queries): `{query, params}` with the connection string in
 *   `Neon-Connection-String`, answered as Neon answers with `Neon-Raw-Text-Output` and
 *   `Neon-Array-Mode`: the fields' names and type OIDs, and each row's values as Postgres's text; an
 *   error as 400 with its message and fields. The bridge runs the query through its own WebSocket side.
 */

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

interface Link {
  target: { hostname: string; port: number };
  tcp?: Socket<undefined>;
  /** Bytes from the WebSocket not yet accepted by the TCP socket (before it connects, or under backpressure). */
  backlog: Uint8Array[];
  closed: boolean;
}

export interface NeonBridge {
  /** What to give the driver as its wsProxy: `127.0.0.1:{port}`. */
  readonly address: string;
  /** What to give the driver as its HTTP endpoint: `http://127.0.0.1:{port}/sql`. */
  readonly httpEndpoint: string;
  stop(): Promise<void>;
}

/** The error fields Neon's HTTP answer carries beside the message (the driver copies them onto its error). */
const ERROR_FIELDS = ["severity", "code", "detail", "hint", "position", "internalPosition", "internalQuery", "where", "schema", "table", "column", "dataType", "constraint", "file", "line", "routine"] as const;

/** One query as Neon's HTTP endpoint runs it, on a pool per connection string. */
async function answerSql(request: Request, pools: Map<string, Pool>, wsProxy: string): Promise<Response> {
  const connectionString = request.headers.get("neon-connection-string");
  if (!connectionString) return Response.json({ message: "missing Neon-Connection-String" }, { status: 400 });
  const body = (await request.json()) as { query?: string; params?: (string | null)[]; queries?: unknown };
  if (body.queries !== undefined || typeof body.query !== "string") return Response.json({ message: "only single queries are bridged" }, { status: 400 });
  let pool = pools.get(connectionString);
  if (!pool) {
    class BridgedClient extends Client {
      constructor(config?: string | ClientConfig) {
        super(config);
        Object.assign(this.neonConfig, { wsProxy, useSecureWebSocket: false, pipelineConnect: false, pipelineTLS: false });
      }
    }
    pool = new (class extends Pool {
      override Client = BridgedClient;
    })({ connectionString, max: 4 });
    pool.on("error", () => {});
    pools.set(connectionString, pool);
  }
  const client = await pool.connect();
  try {
    const result = await client.query({ text: body.query, values: body.params ?? [], rowMode: "array", types: { getTypeParser: () => (value: string) => value } });
    return Response.json({
      command: result.command,
      rowCount: result.rowCount,
      rows: result.rows,
      fields: result.fields.map((f: FieldDef) => ({ name: f.name, dataTypeID: f.dataTypeID, tableID: f.tableID, columnID: f.columnID, dataTypeSize: f.dataTypeSize, dataTypeModifier: f.dataTypeModifier, format: f.format })),
      rowAsArray: true,
    });
  } catch (err) {
    if (!(err instanceof DatabaseError)) return new Response(String(err), { status: 500 });
    const fields = Object.fromEntries(ERROR_FIELDS.map((k) => [k, err[k]]).filter(([, v]) => v !== undefined));
    return Response.json({ message: err.message, ...fields }, { status: 400 });
  } finally {
    client.release();
  }
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

export interface NeonBridgeOptions {
  /** 0 (any free port) when unset. */
  port?: number;
  /** 127.0.0.1 when unset. */
  hostname?: string;
}

/** Starts the bridge, on a free loopback port unless told otherwise. */
export function startNeonBridge(options: NeonBridgeOptions = {}): NeonBridge {
  const sockets = new Set<ServerWebSocket<Link>>();
  const pools = new Map<string, Pool>();
  const server: Server<Link> = Bun.serve<Link>({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port ?? 0,
    fetch(req, srv) {
      if (req.method === "POST" && new URL(req.url).pathname === "/sql") return answerSql(req, pools, `127.0.0.1:${srv.port}`);
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
    httpEndpoint: `http://127.0.0.1:${server.port}/sql`,
    async stop() {
      await Promise.allSettled([...pools.values()].map((pool) => pool.end()));
      for (const ws of sockets) ws.close();
      await server.stop(true);
    },
  };
}
