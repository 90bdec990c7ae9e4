import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createKeyValueStore } from "../../common/kv/create.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { createLogger } from "../../common/log.ts";

/** What only the in-process store can show: expiry on a controlled clock, sweeping, process lifetime. */

function fakeClock(start = 1_700_000_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

describe("in-process key-value store", () => {
  test("a key is readable until its expiry and gone from that moment on", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now });
    await kv.set("chat:char:1", "profile", { ex: 3600 });
    clock.advance(3_599_999);
    expect(await kv.get("chat:char:1")).toBe("profile");
    clock.advance(1);
    expect(await kv.get("chat:char:1")).toBeNull();
    await kv.close();
  });

  test("a plain set removes an earlier expiry, and expire sets a new one", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now });
    await kv.set("k", "v1", { ex: 10 });
    await kv.set("k", "v2");
    clock.advance(60_000);
    expect(await kv.get("k")).toBe("v2");
    expect(await kv.expire("k", 5)).toBe(true);
    clock.advance(5_000);
    expect(await kv.get("k")).toBeNull();
    expect(await kv.expire("k", 5)).toBe(false);
    await kv.close();
  });

  test("expire with zero seconds deletes the key at once, as Redis does", async () => {
    const kv = createMemoryKeyValueStore();
    await kv.set("k", "v");
    expect(await kv.expire("k", 0)).toBe(true);
    expect(await kv.get("k")).toBeNull();
    await kv.close();
  });

  test("a lock whose holder vanished can be taken once its expiry passes", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now });
    expect(await kv.set("chat:lock:s1", "dead-holder", { nx: true, ex: 30 })).toBe(true);
    clock.advance(29_000);
    expect(await kv.set("chat:lock:s1", "new-holder", { nx: true, ex: 30 })).toBe(false);
    clock.advance(1_000);
    expect(await kv.set("chat:lock:s1", "new-holder", { nx: true, ex: 30 })).toBe(true);
    expect(await kv.deleteIfEquals("chat:lock:s1", "dead-holder")).toBe(false);
    await kv.close();
  });

  test("expired keys that nobody reads again are swept out of memory", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now });
    for (let i = 0; i < 100; i++) await kv.set(`chat:qr:c:${i}`, "q", { ex: 60 });
    await kv.set("kept", "forever");
    await kv.lpush("processing_queue", "job");
    expect(kv.size).toBe(102);
    clock.advance(60_000);
    expect(kv.sweep()).toBe(100);
    expect(kv.size).toBe(2);
    expect(await kv.get("kept")).toBe("forever");
    await kv.close();
  });

  test("the periodic sweep runs by itself", async () => {
    const clock = fakeClock();
    const kv = createMemoryKeyValueStore({ now: clock.now, sweepIntervalMs: 5 });
    await kv.set("short", "lived", { ex: 1 });
    clock.advance(1_000);
    for (let waited = 0; kv.size > 0 && waited < 5_000; waited += 10) await Bun.sleep(10);
    expect(kv.size).toBe(0);
    await kv.close();
  });

  test("a store that is never closed does not keep the process alive", async () => {
    const script = [
      `import { createMemoryKeyValueStore } from ${JSON.stringify(join(import.meta.dir, "../../common/kv/memory.ts"))};`,
      `const kv = createMemoryKeyValueStore({ sweepIntervalMs: 50 });`,
      `await kv.set("k", "v", { ex: 60 });`,
      `console.log("done");`,
    ].join("\n");
    const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" });
    const guard = setTimeout(() => child.kill(), 20_000);
    const exitCode = await child.exited;
    clearTimeout(guard);
    expect(await new Response(child.stdout).text()).toBe("done\n");
    expect(child.signalCode).toBeNull();
    expect(exitCode).toBe(0);
  }, 30_000);

  test("lists behave as a queue when one process produces and consumes", async () => {
    const kv = createMemoryKeyValueStore();
    await kv.lpush("processing_queue", "j1", "j2");
    expect(await kv.lmove("processing_queue", "processing_queue:in-flight", "right", "left")).toBe("j1");
    expect(await kv.lrem("processing_queue:in-flight", 1, "j1")).toBe(1);
    expect(kv.size).toBe(1);
    // Rotating a one-element list onto itself keeps the element.
    await kv.lpush("ring", "only");
    expect(await kv.lmove("ring", "ring", "right", "left")).toBe("only");
    expect(await kv.lrange("ring", 0, -1)).toEqual(["only"]);
    await kv.close();
  });
});

describe("createKeyValueStore", () => {
  const capture = () => {
    const lines: Record<string, unknown>[] = [];
    return { lines, logger: createLogger({ level: "debug", format: "json", write: (line) => lines.push(JSON.parse(line)) }) };
  };

  test("with nothing configured it builds the in-process store and warns that it is single process only", async () => {
    const { lines, logger } = capture();
    const kv = createKeyValueStore({ driver: "memory" }, logger);
    expect(kv.driver).toBe("memory");
    expect(lines).toHaveLength(1);
    expect(lines[0]!.level).toBe("warn");
    expect(String(lines[0]!.msg)).toContain("single process only");
    await kv.close();
  });

  test("with Redis or Upstash configured it builds that adapter and never logs credentials", async () => {
    const { lines, logger } = capture();
    const redis = createKeyValueStore({ driver: "redis", url: "redis://user:s3cret@cache.internal:6380/2" }, logger);
    const upstash = createKeyValueStore({ driver: "upstash", url: "https://eu1-example.upstash.io", token: "tok3n" }, logger);
    expect(redis.driver).toBe("redis");
    expect(upstash.driver).toBe("upstash");
    const logged = JSON.stringify(lines);
    expect(logged).toContain("cache.internal:6380");
    expect(logged).toContain("eu1-example.upstash.io");
    expect(logged).not.toContain("s3cret");
    expect(logged).not.toContain("tok3n");
    expect(lines.every((line) => line.level === "info")).toBe(true);
    await redis.close();
    await upstash.close();
  });
});
