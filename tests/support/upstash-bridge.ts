import { RedisClient } from "bun";
import { testRedisUrl } from "./redis.ts";

/**
 * A loopback server that speaks the Upstash Redis REST protocol and runs every command on a real
 * redis-server, so `@upstash/redis` can be tested unchanged without the Upstash cloud.
 *
 * Wire format (as the SDK sends and reads it):
 * - `POST /` with a JSON array `["SET","k","v","EX",30]` → `200 {"result": …}`, or
 *   `400 {"error": "WRONGTYPE …"}` when Redis rejects the command.
 * - `POST /pipeline` and `POST /multi-exec` with an array of such arrays → `200 [{"result": …} | {"error": …}, …]`
 *   in order; multi-exec runs them in MULTI/EXEC on a connection of its own, and a command Redis
 *   refuses to queue aborts the whole transaction with `400 {"error": "EXECABORT …"}`.
 * - `Authorization: Bearer <token>` (or `?_token=`) is required: `401 {"error": …}` otherwise.
 * - With `Upstash-Encoding: base64` every string in a result is base64 of its UTF-8 bytes, except a
 *   whole result of "OK" (the status reply); numbers and nulls are left alone; errors are never
 *   encoded. The SDK decodes strings inside arrays without that exception, so an "OK" stored in a
 *   list or read by MGET must be encoded.
 * - Replies are shaped as a RESP2 server gives them (the SDK expects that): Bun's client speaks
 *   RESP3, so maps are flattened to [k, v, …], booleans become 1/0 and doubles become strings.
 * Not implemented: the path-style form (`GET /set/k/v`), streaming subscribe, blocking commands.
 */

export interface UpstashBridgeOptions {
  redisUrl?: string;
  /** The bearer token clients must send; a random one when unset. */
  token?: string;
  port?: number;
}

export interface BridgeRequest {
  path: string;
  commands: string[][];
}

export interface UpstashBridge {
  readonly url: string;
  readonly token: string;
  /** Every authorised request served, so tests can see how the SDK batched its commands. */
  readonly requests: readonly BridgeRequest[];
  stop(): Promise<void>;
}

type Json = null | number | string | Json[];
type Outcome = { result: Json } | { error: string };

/** Commands that would change or hold the shared connection's state for every other request. */
const REFUSED = new Set([
  "AUTH", "HELLO", "SELECT", "QUIT", "RESET", "CLIENT", "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH",
  "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR",
  "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT",
]);

class BadRequest extends Error {}

const isServerError = (err: unknown) => (err as { code?: unknown } | null)?.code === "ERR_REDIS_SERVER_ERROR";
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

function parseCommand(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) throw new BadRequest("ERR failed to parse command: expected a non-empty JSON array");
  return value.map((part) => {
    if (typeof part === "string") return part;
    if (typeof part === "number" || typeof part === "boolean") return String(part);
    throw new BadRequest(`ERR failed to parse command: unsupported argument ${JSON.stringify(part)}`);
  });
}

function parseCommands(value: unknown): string[][] {
  if (!Array.isArray(value) || value.length === 0) throw new BadRequest("ERR failed to parse pipeline: expected a non-empty JSON array of commands");
  return value.map(parseCommand);
}

/** Bun's RESP3 reply, reshaped into what Upstash sends (RESP2 shapes, optional base64 strings). */
function encodeReply(reply: unknown, base64: boolean, nested = false): Json {
  const text = (s: string) => (base64 && (nested || s !== "OK") ? Buffer.from(s, "utf8").toString("base64") : s);
  if (reply === null || reply === undefined) return null;
  if (typeof reply === "string") return text(reply);
  if (typeof reply === "number") return Number.isInteger(reply) ? reply : text(String(reply));
  if (typeof reply === "bigint") return Number.isSafeInteger(Number(reply)) ? Number(reply) : text(reply.toString());
  if (typeof reply === "boolean") return reply ? 1 : 0;
  if (reply instanceof Uint8Array) return base64 ? Buffer.from(reply).toString("base64") : Buffer.from(reply).toString("utf8");
  if (reply instanceof Error) return text(reply.message);
  if (Array.isArray(reply)) return reply.map((item) => encodeReply(item, base64, true));
  if (typeof reply === "object") {
    return Object.entries(reply).flatMap(([k, v]) => [encodeReply(k, base64, true), encodeReply(v, base64, true)]);
  }
  return text(String(reply));
}

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

export async function startUpstashBridge(options: UpstashBridgeOptions = {}): Promise<UpstashBridge> {
  const redisUrl = options.redisUrl ?? testRedisUrl;
  const token = options.token ?? crypto.randomUUID().replaceAll("-", "");
  const requests: BridgeRequest[] = [];
  const newClient = () =>
    new RedisClient(redisUrl, { connectionTimeout: 2_000, autoReconnect: false, enableOfflineQueue: false });
  const shared = newClient();
  let connecting: Promise<unknown> | undefined;
  const sharedClient = async () => {
    if (!shared.connected) {
      connecting ??= shared.connect().finally(() => {
        connecting = undefined;
      });
      await connecting;
    }
    return shared;
  };

  /** Commands on one connection are answered in order, so sending them all at once keeps pipeline order. */
  const runAll = async (commands: string[][], base64: boolean): Promise<Outcome[]> => {
    const client = await sharedClient();
    const settled = await Promise.allSettled(
      commands.map(([name, ...args]) => {
        if (REFUSED.has(name!.toUpperCase())) return Promise.reject(new BadRequest(`ERR command ${name} is not supported over REST`));
        return client.send(name!, args);
      }),
    );
    const lost = settled.find((s) => s.status === "rejected" && !isServerError(s.reason) && !(s.reason instanceof BadRequest));
    if (lost?.status === "rejected") throw lost.reason;
    return settled.map((s) => (s.status === "fulfilled" ? { result: encodeReply(s.value, base64) } : { error: messageOf(s.reason) }));
  };

  const runTransaction = async (commands: string[][], base64: boolean): Promise<Outcome[]> => {
    const client = newClient();
    try {
      await client.connect();
      await client.send("MULTI", []);
      const queued = await Promise.allSettled(commands.map(([name, ...args]) => client.send(name!, args)));
      const lost = queued.find((q) => q.status === "rejected" && !isServerError(q.reason));
      if (lost?.status === "rejected") throw lost.reason;
      // EXEC fails with EXECABORT when any command was refused at queue time.
      const replies: unknown = await client.send("EXEC", []);
      if (!Array.isArray(replies)) throw new Error(`EXEC answered ${JSON.stringify(replies)}`);
      return replies.map((reply) => (reply instanceof Error ? { error: reply.message } : { result: encodeReply(reply, base64) }));
    } finally {
      client.close();
    }
  };

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname.replace(/\/+$/, "") || "/";
      if (path !== "/" && path !== "/pipeline" && path !== "/multi-exec") return json({ error: "Not found" }, 404);
      if (req.method !== "POST") return json({ error: `Method ${req.method} not allowed` }, 405);
      const bearer = req.headers.get("authorization")?.match(/^Bearer\s+(.+)$/i)?.[1] ?? url.searchParams.get("_token");
      if (bearer !== token) return json({ error: "Unauthorized: invalid or missing auth token" }, 401);
      const base64 = req.headers.get("upstash-encoding")?.toLowerCase() === "base64";
      try {
        let body: unknown;
        try {
          body = await req.json();
        } catch {
          throw new BadRequest("ERR failed to parse request body as JSON");
        }
        if (path === "/") {
          const command = parseCommand(body);
          requests.push({ path, commands: [command] });
          const [outcome] = await runAll([command], base64);
          return "error" in outcome! ? json(outcome, 400) : json(outcome);
        }
        const commands = parseCommands(body);
        requests.push({ path, commands });
        return json(path === "/pipeline" ? await runAll(commands, base64) : await runTransaction(commands, base64));
      } catch (err) {
        if (err instanceof BadRequest || isServerError(err)) return json({ error: messageOf(err) }, 400);
        return json({ error: `Redis unavailable: ${messageOf(err)}` }, 500);
      }
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    token,
    requests,
    async stop() {
      await server.stop(true);
      shared.close();
    },
  };
}
