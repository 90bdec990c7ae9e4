/** Lua scripts shared by the adapters that speak to a Redis server (over TCP or Upstash REST). */

/** Compare-and-delete in one server-side step, so a lock is never released by a holder whose token expired. */
/** Compare-and-extend: only the holder of a lock renews it, never a holder whose lease already lapsed. */
export const EXPIRE_IF_EQUALS_SCRIPT =
  'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("EXPIRE", KEYS[1], ARGV[2]) else return 0 end';

export const RELEASE_IF_EQUALS_SCRIPT =
  'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end';
