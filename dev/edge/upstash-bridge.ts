import { RedisClient } from "bun";
import type { KeyValueStore } from "../../common/kv/index.ts";
import { EXPIRE_IF_EQUALS_SCRIPT, HASH_INCREMENT_SCRIPT, RELEASE_IF_EQUALS_SCRIPT, SET_IF_ABSENT_THEN_MGET_SCRIPT } from "../../common/kv/lua.ts";

/**
 * A loopback server that speaks the Upstash Redis REST protocol, so `@upstash/redis` (the edge API's
 * key-value adapter) runs unchanged without the Upstash cloud. Behind it, either:
 * - a real redis-server (`redisUrl`): every command is sent on as it came, or
 * - the project's in-process store (`store`, common/kv/memory.ts): exactly the commands the Upstash
 *   adapter (common/kv/upstash.ts) sends are served, EVAL of the scripts in common/kv/lua.ts included
 *   (recognised by their text and run as the store's equivalent method, which is what the script does
 *   on Redis); any other command or script is answered with Upstash's error shape.
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

export type UpstashBridgeOptions = ({ redisUrl: string; store?: never } | { store: KeyValueStore; redisUrl?: never }) & {
  /** The bearer token clients must send; a random one when unset. */
  token?: string;
  /** 0 (any free port) when unset. */
  port?: number;
  /** 127.0.0.1 when unset. */
  hostname?: string;
};

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

/** Where the bridge runs its commands: a pipeline in order, a transaction all at once. */
interface Backend {
  runAll(commands: string[][], base64: boolean): Promise<Outcome[]>;
  runTransaction(commands: string[][], base64: boolean): Promise<Outcome[]>;
  close(): void;
}

function redisBackend(redisUrl: string): Backend {
  const newClient = () => new RedisClient(redisUrl, { connectionTimeout: 2_000, autoReconnect: false, enableOfflineQueue: false });
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
  return {
    /** Commands on one connection are answered in order, so sending them all at once keeps pipeline order. */
    async runAll(commands, base64) {
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
    },
    async runTransaction(commands, base64) {
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
    },
    close: () => shared.close(),
  };
}

/** A command the store-backed bridge does not serve (Redis would queue none of it in a transaction either). */
class Unsupported extends BadRequest {}

/** A store's error as Redis words it: the adapter's "memory: " prefix dropped. */
const storeMessage = (err: unknown) => messageOf(err).replace(/^memory: /, "");

function integerArg(value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !/^-?\d+$/.test(value) || !Number.isSafeInteger(n)) throw new BadRequest("ERR value is not an integer or out of range");
  return n;
}

function arity(args: readonly string[], min: number, name: string, even = false): void {
  if (args.length < min || (even && (args.length - min) % 2 !== 0)) throw new BadRequest(`ERR wrong number of arguments for '${name.toLowerCase()}' command`);
}

const listEnd = (word: string | undefined) => {
  const end = word?.toLowerCase();
  if (end !== "left" && end !== "right") throw new BadRequest("ERR syntax error");
  return end;
};

/**
 * One command on the store, started at once: every store method does its work before its first
 * await, so commands started one after the other in the same tick run as one step (a transaction).
 * Throws BadRequest for a malformed or unserved command before anything runs.
 */
function startOnStore(store: KeyValueStore, [rawName, ...args]: string[]): () => Promise<Json> {
  const name = rawName!.toUpperCase();
  switch (name) {
    case "GET":
      arity(args, 1, name);
      return () => store.get(args[0]!);
    case "MGET":
      arity(args, 1, name);
      return () => store.mget(args);
    case "SET": {
      arity(args, 2, name);
      const [key, value, ...rest] = args as [string, string, ...string[]];
      let nx = false;
      let ex: number | undefined;
      for (let i = 0; i < rest.length; i++) {
        const word = rest[i]!.toUpperCase();
        if (word === "NX") nx = true;
        else if (word === "EX") ex = integerArg(rest[++i]);
        else throw new Unsupported(`ERR SET option ${rest[i]} is not served by the local Upstash bridge`);
      }
      return async () => ((await store.set(key, value, { nx, ...(ex === undefined ? {} : { ex }) })) ? "OK" : null);
    }
    case "DEL": {
      arity(args, 1, name);
      return async () => {
        // Started together so no other command runs between the check and the delete.
        const checks = args.map((key) => store.get(key).then((v) => v !== null, (err: unknown) => /WRONGTYPE/.test(messageOf(err))));
        const deletes = args.map((key) => store.del(key));
        const existed = await Promise.all(checks);
        await Promise.all(deletes);
        return existed.filter(Boolean).length;
      };
    }
    case "EXPIRE":
      arity(args, 2, name);
      return async () => ((await store.expire(args[0]!, integerArg(args[1]))) ? 1 : 0);
    case "LPUSH":
      arity(args, 2, name);
      return () => store.lpush(args[0]!, ...args.slice(1));
    case "RPOP":
      if (args.length !== 1) throw new Unsupported("ERR RPOP with a count is not served by the local Upstash bridge");
      return () => store.rpop(args[0]!);
    case "LMOVE":
      arity(args, 4, name);
      return () => store.lmove(args[0]!, args[1]!, listEnd(args[2]), listEnd(args[3]));
    case "LREM":
      arity(args, 3, name);
      return () => store.lrem(args[0]!, integerArg(args[1]), args[2]!);
    case "LRANGE":
      arity(args, 3, name);
      return () => store.lrange(args[0]!, integerArg(args[1]), integerArg(args[2]));
    case "LLEN":
      arity(args, 1, name);
      return () => store.llen(args[0]!);
    case "HSET": {
      arity(args, 3, name, true);
      const [key, ...pairs] = args as [string, ...string[]];
      const fields: Record<string, string> = {};
      for (let i = 0; i < pairs.length; i += 2) fields[pairs[i]!] = pairs[i + 1]!;
      return async () => {
        // Started together so no other command runs between the read and the write.
        const [existing] = await Promise.all([store.hgetall(key), store.hset(key, fields)]);
        return Object.keys(fields).filter((f) => !(f in existing)).length;
      };
    }
    case "HGETALL":
      arity(args, 1, name);
      return async () => Object.entries(await store.hgetall(args[0]!)).flat();
    case "HDEL":
      arity(args, 2, name);
      return () => store.hdel(args[0]!, args.slice(1));
    case "EVAL":
      return startScript(store, args);
    default:
      throw new Unsupported(`ERR unknown command '${rawName}': the local Upstash bridge serves only what the project's Upstash adapter sends`);
  }
}

/** EVAL of one of the project's scripts (common/kv/lua.ts), as the store's method that does the same. */
function startScript(store: KeyValueStore, args: readonly string[]): () => Promise<Json> {
  arity(args, 2, "EVAL");
  const [script, numKeys, ...rest] = args as [string, string, ...string[]];
  const count = integerArg(numKeys);
  if (count < 0 || count > rest.length) throw new BadRequest("ERR Number of keys can't be greater than number of args");
  const keys = rest.slice(0, count);
  const argv = rest.slice(count);
  switch (script) {
    case SET_IF_ABSENT_THEN_MGET_SCRIPT:
      return async () => {
        const { set, values } = await store.setIfAbsentThenMget(keys[0]!, argv[0]!, integerArg(argv[1]), keys.slice(1));
        return [set ? 1 : 0, values];
      };
    case RELEASE_IF_EQUALS_SCRIPT:
      return async () => ((await store.deleteIfEquals(keys[0]!, argv[0]!)) ? 1 : 0);
    case EXPIRE_IF_EQUALS_SCRIPT:
      return async () => ((await store.expireIfEquals(keys[0]!, argv[0]!, integerArg(argv[1]))) ? 1 : 0);
    case HASH_INCREMENT_SCRIPT: {
      const increments: Record<string, number> = {};
      for (let i = 0; i + 1 < argv.length; i += 2) increments[argv[i]!] = Number(argv[i + 1]);
      return async () => {
        await store.hincrbyfloat(keys[0]!, increments);
        return Math.floor(argv.length / 2);
      };
    }
    default:
      throw new Unsupported("ERR the local Upstash bridge runs only the scripts in common/kv/lua.ts");
  }
}

function storeBackend(store: KeyValueStore): Backend {
  const settle = async (run: () => Promise<Json>, base64: boolean): Promise<Outcome> => {
    try {
      return { result: encodeReply(await run(), base64) };
    } catch (err) {
      return { error: storeMessage(err) };
    }
  };
  return {
    async runAll(commands, base64) {
      const outcomes: Outcome[] = [];
      for (const command of commands) {
        let run: () => Promise<Json>;
        try {
          run = startOnStore(store, command);
        } catch (err) {
          if (!(err instanceof BadRequest)) throw err;
          outcomes.push({ error: err.message });
          continue;
        }
        outcomes.push(await settle(run, base64));
      }
      return outcomes;
    },
    async runTransaction(commands, base64) {
      // Every command is checked before any runs, as Redis queues them: one it refuses aborts all.
      let runs: (() => Promise<Json>)[];
      try {
        runs = commands.map((command) => startOnStore(store, command));
      } catch (err) {
        if (err instanceof BadRequest) throw new BadRequest(`EXECABORT Transaction discarded because of previous errors: ${err.message}`);
        throw err;
      }
      // Started in one tick, so nothing else runs between them.
      return Promise.all(runs.map((run) => settle(run, base64)));
    },
    close: () => {},
  };
}

export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  const token = options.token ?? crypto.randomUUID().replaceAll("-", "");
  const requests: BridgeRequest[] = [];
  const backend = options.store ? storeBackend(options.store) : redisBackend(options.redisUrl);
  const { runAll, runTransaction } = backend;

  const server = Bun.serve({
    hostname: options.hostname ?? "127.0.0.1",
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
      backend.close();
    },
  };
}
