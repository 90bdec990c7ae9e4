import { RedisClient } from "bun";

/**
 * Live Redis for test suites: where it is, whether it answers, and a key prefix per suite so suites
 * running at the same time (or a crashed earlier run) never see each other's keys.
 */

export const DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379";

/** REDIS_URL_TEST points the live suites at another server; the local default otherwise. */
export const testRedisUrl = process.env.REDIS_URL_TEST || DEFAULT_TEST_REDIS_URL;

export type RedisProbe = { reachable: true; url: string } | { reachable: false; url: string; reason: string };

async function withClient<T>(url: string, use: (client: RedisClient) => Promise<T>): Promise<T> {
  const client = new RedisClient(url, { connectionTimeout: 1_000, autoReconnect: false, enableOfflineQueue: false });
  try {
    await client.connect();
    return await use(client);
  } finally {
    client.close();
  }
}

/** Whether a Redis answers PING at url; the reason names the URL without its credentials. */
export async function probeRedis(url: string = testRedisUrl): Promise<RedisProbe> {
  const where = redactedUrl(url);
  try {
    const pong: unknown = await withClient(url, (client) => client.send("PING", []));
    if (pong === "PONG") return { reachable: true, url };
    return { reachable: false, url, reason: `${where} answered PING with ${JSON.stringify(pong)}` };
  } catch (err) {
    return { reachable: false, url, reason: `no Redis at ${where} (${err instanceof Error ? err.message : String(err)})` };
  }
}

export function redactedUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = "";
  parsed.password = "";
  return parsed.toString();
}

/** A prefix no other suite or run will use: `test:{suite}:{random}:`. */
export function uniqueKeyPrefix(suite: string): string {
  return `test:${suite}:${crypto.randomUUID().slice(0, 8)}:`;
}

/** Every key matching a SCAN pattern: SCAN, so a big shared server is never blocked. */
async function scanKeys(client: RedisClient, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const reply = (await client.send("SCAN", [cursor, "MATCH", pattern, "COUNT", "500"])) as [string, string[]];
    cursor = reply[0];
    keys.push(...reply[1]);
  } while (cursor !== "0");
  return keys;
}

async function unlink(client: RedisClient, keys: readonly string[]): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < keys.length; i += 500) deleted += Number(await client.send("UNLINK", keys.slice(i, i + 500)));
  return deleted;
}

function checkedPrefix(prefix: string): string {
  if (!/^[\w:.-]+$/.test(prefix)) throw new Error(`refusing to match by a prefix with glob characters: ${prefix}`);
  return `${prefix}*`;
}

/** Deletes every key under prefix; returns how many. */
export async function deleteKeysWithPrefix(prefix: string, url: string = testRedisUrl): Promise<number> {
  const pattern = checkedPrefix(prefix);
  return withClient(url, async (client) => unlink(client, await scanKeys(client, pattern)));
}

/** Deletes every key `matches` picks, for keys that share no prefix (e.g. those naming given ids); returns how many. */
export async function deleteKeysMatching(matches: (key: string) => boolean, url: string = testRedisUrl): Promise<number> {
  return withClient(url, async (client) => unlink(client, (await scanKeys(client, "*")).filter(matches)));
}

/** A free loopback port with nothing listening on it (for "server is down" cases). */
export function closedPort(): number {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/** Every key under prefix, sorted. */
export async function keysWithPrefix(prefix: string, url: string = testRedisUrl): Promise<string[]> {
  const pattern = checkedPrefix(prefix);
  return withClient(url, async (client) => (await scanKeys(client, pattern)).sort());
}
