import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createUpstashKeyValueStore } from "../../common/kv/upstash.ts";
import { deleteKeysWithPrefix, probeRedis, uniqueKeyPrefix } from "../support/redis.ts";
import { startUpstashBridge, type UpstashBridge } from "../../dev/edge/upstash-bridge.ts";

/**
 * The Upstash adapter's round trips, and the REST bridge's wire format as seen by a plain HTTP
 * client, so the contract suite's Upstash run rests on a faithful server.
 */

const redis = await probeRedis();
if (!redis.reachable) console.warn(`kv.upstash: skipped: ${redis.reason}`);

describe.skipIf(!redis.reachable)("Upstash key-value store over the REST bridge", () => {
  const prefix = uniqueKeyPrefix("kv-upstash");
  const key = (name: string) => prefix + name;
  let bridge: UpstashBridge;

  beforeAll(async () => {
    bridge = await startUpstashBridge({ redisUrl: redis.url });
  });
  afterAll(async () => {
    await bridge?.stop();
    await deleteKeysWithPrefix(prefix, redis.url);
  });

  const call = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${bridge.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bridge.token}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });

  test("mget of several keys is one request carrying one MGET", async () => {
    const kv = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token });
    await kv.set(key("a"), "1");
    const before = bridge.requests.length;
    expect(await kv.mget([key("a"), key("b"), key("c")])).toEqual(["1", null, null]);
    expect(bridge.requests.slice(before)).toEqual([{ path: "/pipeline", commands: [["mget", key("a"), key("b"), key("c")]] }]);
  });

  test("fifty lock attempts made together travel in a single pipeline request", async () => {
    const kv = createUpstashKeyValueStore({ url: bridge.url, token: bridge.token });
    const before = bridge.requests.length;
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => kv.set(key("lock"), `t${i}`, { nx: true, ex: 30 })));
    expect(results.filter(Boolean)).toHaveLength(1);
    const sent = bridge.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.commands).toHaveLength(50);
  });

  test("the bridge answers one command with its result, base64-encoded when asked", async () => {
    expect(await (await call("/", ["SET", key("enc"), "héllo"])).json()).toEqual({ result: "OK" });
    expect(await (await call("/", ["GET", key("enc")])).json()).toEqual({ result: "héllo" });
    expect(await (await call("/", ["GET", key("enc")], { "upstash-encoding": "base64" })).json()).toEqual({
      result: Buffer.from("héllo").toString("base64"),
    });
    expect(await (await call("/", ["RPUSH", key("enc:list"), "OK", "x"], { "upstash-encoding": "base64" })).json()).toEqual({ result: 2 });
    // Inside an array even "OK" is encoded: the SDK decodes array items without exception.
    expect(await (await call("/", ["LRANGE", key("enc:list"), 0, -1], { "upstash-encoding": "base64" })).json()).toEqual({
      result: ["T0s=", "eA=="],
    });
    expect(await (await call("/", ["GET", key("never")], { "upstash-encoding": "base64" })).json()).toEqual({ result: null });
  });

  test("the bridge reports a failed command as 400 with an error body", async () => {
    await call("/", ["SET", key("str"), "v"]);
    const res = await call("/", ["LPUSH", key("str"), "x"]);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toStartWith("WRONGTYPE");
    expect((await call("/", { not: "a command" })).status).toBe(400);
  });

  test("the bridge refuses a missing or wrong token with 401", async () => {
    const none = await fetch(bridge.url, { method: "POST", body: JSON.stringify(["PING"]) });
    expect(none.status).toBe(401);
    expect(await none.json()).toHaveProperty("error");
    expect((await call("/", ["PING"], { authorization: "Bearer wrong" })).status).toBe(401);
  });

  test("a bridge pipeline answers each command in order, errors in place", async () => {
    const res = await call("/pipeline", [
      ["SET", key("p"), "1"],
      ["LPUSH", key("p"), "x"],
      ["INCR", key("p")],
      ["GET", key("p")],
    ]);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result?: unknown; error?: string }[];
    expect(body[0]).toEqual({ result: "OK" });
    expect(body[1]!.error).toStartWith("WRONGTYPE");
    expect(body.slice(2)).toEqual([{ result: 2 }, { result: "2" }]);
  });

  test("a bridge transaction applies all of its commands, or none when one cannot be queued", async () => {
    const ok = await call("/multi-exec", [
      ["SET", key("tx"), "a"],
      ["APPEND", key("tx"), "b"],
      ["GET", key("tx")],
    ]);
    expect(await ok.json()).toEqual([{ result: "OK" }, { result: 2 }, { result: "ab" }]);

    const aborted = await call("/multi-exec", [["SET", key("tx"), "changed"], ["SET", key("tx")]]);
    expect(aborted.status).toBe(400);
    expect(((await aborted.json()) as { error: string }).error).toStartWith("EXECABORT");
    expect(await (await call("/", ["GET", key("tx")])).json()).toEqual({ result: "ab" });
  });
});
