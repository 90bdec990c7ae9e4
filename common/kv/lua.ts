import type { SetThenRead } from "./index.ts";

/** Lua scripts shared by the adapters that speak to a Redis server (over TCP or Upstash REST). */

/** Compare-and-delete in one server-side step, so a lock is never released by a holder whose token expired. */
/** Compare-and-extend: only the holder of a lock renews it, never a holder whose lease already lapsed. */
export const EXPIRE_IF_EQUALS_SCRIPT =
  'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("EXPIRE", KEYS[1], ARGV[2]) else return 0 end';

export const RELEASE_IF_EQUALS_SCRIPT =
  'if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end';

/**
 * SET NX EX, then MGET of the other keys whether or not it set: KEYS[1] is the key set, ARGV its
 * value and expiry. Answers {1 or 0 (whether it set), the values}; one command, so that a lock and
 * what its holder reads go in one round trip, and a refused caller still learns what it needs to
 * answer (a session that is not the caller's is a 404 whoever holds its lock).
 */
export const SET_IF_ABSENT_THEN_MGET_SCRIPT =
  'local set = redis.call("SET", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) and 1 or 0 ' +
  'if #KEYS == 1 then return {set, {}} end return {set, redis.call("MGET", unpack(KEYS, 2))}';

/** What SET_IF_ABSENT_THEN_MGET_SCRIPT answers, as a store's method returns it. */
export function setThenReadReply(reply: unknown): SetThenRead {
  if (!Array.isArray(reply) || reply.length !== 2 || !Array.isArray(reply[1])) throw new Error("unexpected reply to the set-then-read script");
  return { set: reply[0] === 1, values: (reply[1] as unknown[]).map((v) => (typeof v === "string" ? v : null)) };
}

/** Many HINCRBYFLOATs on one hash as one command: ARGV holds field, increment pairs. */
export const HASH_INCREMENT_SCRIPT =
  'for i = 1, #ARGV, 2 do redis.call("HINCRBYFLOAT", KEYS[1], ARGV[i], ARGV[i + 1]) end return #ARGV / 2';

/** Field, increment pairs as a script's ARGV. */
export function incrementArgs(increments: Readonly<Record<string, number>>): string[] {
  const args: string[] = [];
  for (const [field, by] of Object.entries(increments)) args.push(field, String(by));
  return args;
}
