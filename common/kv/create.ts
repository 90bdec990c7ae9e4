import type { KvConfig } from "../config.ts";
import { silentLogger, type Logger } from "../log.ts";
import type { KeyValueStore } from "./index.ts";
import { createMemoryKeyValueStore } from "./memory.ts";
import { createRedisKeyValueStore } from "./redis.ts";
import { createUpstashKeyValueStore } from "./upstash.ts";

/**
 * Builds the configured key-value store. Nothing connects until the first command. `inProcessExpected`:
 * the in-process store is what this install should have (a laptop's defaults), so it is noted as info,
 * not warned about.
 */
export function createKeyValueStore(config: KvConfig, logger: Logger = silentLogger, options: { inProcessExpected?: boolean } = {}): KeyValueStore {
  switch (config.driver) {
    case "upstash":
      logger.info("key-value store: Upstash REST", { host: new URL(config.url).host });
      return createUpstashKeyValueStore({ url: config.url, token: config.token });
    case "redis":
      logger.info("key-value store: Redis over TCP", { host: new URL(config.url).host });
      return createRedisKeyValueStore({ url: config.url });
    case "memory":
      logger[options.inProcessExpected ? "info" : "warn"](
        "key-value store: in-process (single process only; chat locks, cache and the job queue are not shared " +
          "with other processes; set UPSTASH_REDIS_REST_URL/UPSTASH_REDIS_REST_TOKEN or REDIS_URL to share them)",
      );
      return createMemoryKeyValueStore();
  }
}
