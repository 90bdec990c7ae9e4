import { describe, expect, jest, test } from "bun:test";
import { KvError, type KeyValueStore } from "../../common/kv/index.ts";
import { createMemoryKeyValueStore } from "../../common/kv/memory.ts";
import { keepLockAlive, tryAcquireLock } from "../../common/kv/lock.ts";
import { DEFAULT_LOCK_TTL_SECONDS } from "../../common/config-defaults.ts";

function clockedStore() {
  const clock = { now: 1_000_000 };
  return { clock, kv: createMemoryKeyValueStore({ now: () => clock.now }) };
}

describe("session lock", () => {
  test("is taken with a 32-digit hex token when the key is free, and refused while it is held", async () => {
    const { kv } = clockedStore();
    const lock = await tryAcquireLock(kv, "chat:lock:s1");
    expect(lock?.token).toMatch(/^[0-9a-f]{32}$/);
    expect(await kv.get("chat:lock:s1")).toBe(lock!.token);
    expect(await tryAcquireLock(kv, "chat:lock:s1")).toBeNull();
  });

  test("lapses by itself after 30 s, so a holder that died frees the session", async () => {
    const { kv, clock } = clockedStore();
    await tryAcquireLock(kv, "chat:lock:s1");
    clock.now += (DEFAULT_LOCK_TTL_SECONDS - 1) * 1000;
    expect(await tryAcquireLock(kv, "chat:lock:s1")).toBeNull();
    clock.now += 2000;
    expect(await tryAcquireLock(kv, "chat:lock:s1")).not.toBeNull();
  });

  test("a holder extends its own lock, and a holder whose lock lapsed cannot extend the next holder's", async () => {
    const { kv, clock } = clockedStore();
    const lock = await tryAcquireLock(kv, "chat:lock:s1");
    clock.now += (DEFAULT_LOCK_TTL_SECONDS - 1) * 1000;
    expect(await lock!.extend(DEFAULT_LOCK_TTL_SECONDS)).toBe(true);
    clock.now += (DEFAULT_LOCK_TTL_SECONDS - 1) * 1000;
    expect(await tryAcquireLock(kv, "chat:lock:s1")).toBeNull();
    clock.now += 2000;
    const next = await tryAcquireLock(kv, "chat:lock:s1");
    expect(await lock!.extend(DEFAULT_LOCK_TTL_SECONDS)).toBe(false);
    expect(await kv.get("chat:lock:s1")).toBe(next!.token);
  });

  test("kept alive, a lock outlives its expiry until the holder stops renewing it; a lost lease is reported once", async () => {
    const { kv, clock } = clockedStore();
    // The store's clock and the renewal timer move on together, a tenth of a second at a time, each
    // renewal's round trip answered before the next step: the expiries pass without being waited for.
    jest.useFakeTimers();
    const pass = async (ms: number) => {
      for (let passed = 0; passed < ms; passed += 100) {
        clock.now += 100;
        jest.advanceTimersByTime(100);
        for (let tick = 0; tick < 10; tick++) await Promise.resolve();
      }
    };
    try {
      const lock = await tryAcquireLock(kv, "chat:lock:s2", 1);
      let lost = 0;
      const stop = keepLockAlive(lock!, { ttlSeconds: 1, onLost: () => lost++ });
      await pass(1_500);
      expect(await kv.get("chat:lock:s2")).toBe(lock!.token);
      await kv.del("chat:lock:s2");
      await pass(800);
      expect(lost).toBe(1);
      stop();
      const again = await tryAcquireLock(kv, "chat:lock:s2", 1);
      const stopAgain = keepLockAlive(again!, { ttlSeconds: 1 });
      stopAgain();
      await pass(1_200);
      expect(await kv.get("chat:lock:s2")).toBeNull();
    } finally {
      jest.useRealTimers();
    }
  });

  test("release frees the key for the next holder", async () => {
    const { kv } = clockedStore();
    const lock = await tryAcquireLock(kv, "chat:lock:s1");
    expect(await lock!.release()).toBe(true);
    expect(await kv.get("chat:lock:s1")).toBeNull();
    expect(await tryAcquireLock(kv, "chat:lock:s1")).not.toBeNull();
  });

  test("a holder whose lock lapsed cannot release the next holder's lock", async () => {
    const { kv, clock } = clockedStore();
    const late = await tryAcquireLock(kv, "chat:lock:s1");
    clock.now += (DEFAULT_LOCK_TTL_SECONDS + 1) * 1000;
    const next = await tryAcquireLock(kv, "chat:lock:s1");
    expect(next!.token).not.toBe(late!.token);
    expect(await late!.release()).toBe(false);
    expect(await kv.get("chat:lock:s1")).toBe(next!.token);
  });

  test("releasing twice deletes once and asks the store once", async () => {
    const { kv } = clockedStore();
    let deletes = 0;
    const counting: KeyValueStore = { ...kv, deleteIfEquals: (key, value) => (deletes++, kv.deleteIfEquals(key, value)) };
    const lock = await tryAcquireLock(counting, "chat:lock:s1");
    expect([await lock!.release(), await lock!.release()]).toEqual([true, false]);
    expect(deletes).toBe(1);
  });

  test("a store that fails makes acquiring reject with KvError, so the caller can choose to go on without it", async () => {
    const { kv } = clockedStore();
    const refused = () => Promise.reject(new KvError("redis: connection refused"));
    const down: KeyValueStore = { ...kv, set: refused, setIfAbsentThenMget: refused };
    await expect(tryAcquireLock(down, "chat:lock:s1")).rejects.toBeInstanceOf(KvError);
  });
});
