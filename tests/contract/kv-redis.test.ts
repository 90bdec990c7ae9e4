import { afterEach, describe, expect, test } from "bun:test";
import { KvError } from "../../common/kv/index.ts";
import { createRedisKeyValueStore } from "../../common/kv/redis.ts";
import { closedPort, probeRedis } from "../support/redis.ts";

/**
 * Restarting Redis is something only a private server allows, so this suite starts its own
 * redis-server on a free port (no persistence) and skips when the binary is not installed.
 */

const redisServer = Bun.which("redis-server");
if (!redisServer) console.warn("kv.redis: restart tests skipped: no redis-server binary on PATH");

type Server = ReturnType<typeof Bun.spawn>;
const running = new Set<Server>();

async function startServer(port: number): Promise<Server> {
  const server = Bun.spawn([redisServer!, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdout: "ignore",
    stderr: "inherit",
  });
  running.add(server);
  for (let waited = 0; waited < 10_000; waited += 50) {
    if ((await probeRedis(`redis://127.0.0.1:${port}`)).reachable) return server;
    await Bun.sleep(50);
  }
  throw new Error(`redis-server on port ${port} did not start`);
}

async function stopServer(server: Server) {
  server.kill("SIGTERM");
  await server.exited;
  running.delete(server);
}

afterEach(async () => {
  for (const server of running) await stopServer(server);
});
// A test that timed out may still start a server after afterEach ran; never leave one behind.
process.on("exit", () => {
  for (const server of running) server.kill("SIGKILL");
});

describe.skipIf(!redisServer)("Redis key-value store across a server restart", () => {
  test("commands fail with KvError while the server is down and work again as soon as it is back", async () => {
    const port = closedPort();
    const server = await startServer(port);
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500, commandTimeoutMs: 1_000 });
    try {
      expect(await kv.set("chat:lock:s1", "token", { nx: true, ex: 30 })).toBe(true);

      await stopServer(server);
      await expect(kv.get("chat:lock:s1")).rejects.toBeInstanceOf(KvError);
      await expect(kv.lpush("processing_queue", "job")).rejects.toBeInstanceOf(KvError);

      await startServer(port);
      // The restarted server kept nothing (no persistence), and the store reconnected by itself.
      expect(await kv.get("chat:lock:s1")).toBeNull();
      expect(await kv.set("chat:lock:s1", "token-2", { nx: true, ex: 30 })).toBe(true);
      expect(await kv.get("chat:lock:s1")).toBe("token-2");
    } finally {
      await kv.close();
    }
  }, 30_000);

  test("a stalled server (SIGSTOP) costs one command timeout: the commands after it fail at once until the timeout has passed", async () => {
    const port = closedPort();
    const server = await startServer(port);
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500, commandTimeoutMs: 500 });
    try {
      expect(await kv.set("chat:sess:s1", "entry")).toBe(true);
      server.kill("SIGSTOP");
      const first = await kv.get("chat:sess:s1").catch((e: unknown) => e);
      expect((first as KvError).message).toContain("no reply within 500 ms");
      // The rest of a chat turn's commands do not each wait for their own timeout.
      for (const attempt of [kv.mget(["chat:char:c1"]), kv.set("chat:lock:s1", "t", { nx: true, ex: 30 }), kv.deleteIfEquals("chat:lock:s1", "t")]) {
        const error = await attempt.catch((e: unknown) => e);
        expect(error).toBeInstanceOf(KvError);
        expect((error as KvError).message).toContain("the server stalled");
      }
      server.kill("SIGCONT");
      await Bun.sleep(600);
      expect(await kv.get("chat:sess:s1")).toBe("entry");
    } finally {
      server.kill("SIGCONT");
      await kv.close();
    }
  }, 30_000);

  test("a command refused while the server was down is not replayed once it is back", async () => {
    const port = closedPort();
    const server = await startServer(port);
    const kv = createRedisKeyValueStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500, commandTimeoutMs: 1_000 });
    try {
      expect(await kv.llen("processing_queue")).toBe(0);
      await stopServer(server);
      await expect(kv.lpush("processing_queue", "job-reported-as-failed")).rejects.toBeInstanceOf(KvError);
      await startServer(port);
      expect(await kv.lpush("processing_queue", "job-accepted")).toBe(1);
      expect(await kv.lrange("processing_queue", 0, -1)).toEqual(["job-accepted"]);
    } finally {
      await kv.close();
    }
  }, 30_000);
});
