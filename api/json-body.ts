import { HttpError } from "./errors.ts";

/**
 * The JSON body parser of the POST routes. Our request bodies are flat objects; a body nested
 * thousands of levels deep is refused here, because the framework's validation error serialises the
 * value it refused recursively and would overflow the stack on it (a 500 instead of a 400).
 */

export const MAX_BODY_DEPTH = 64;

/** Whether `value` nests arrays or objects deeper than `limit`; iterative, so any depth is safe to measure. */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== "object" || current === null) continue;
    if (depth >= limit) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

export async function parseJsonBody({ request }: { request: Request }): Promise<unknown> {
  let value: unknown;
  try {
    value = JSON.parse(await request.text());
  } catch {
    throw new HttpError(400, "body is not valid JSON");
  }
  if (nestsDeeperThan(value, MAX_BODY_DEPTH)) throw new HttpError(400, `body is nested deeper than ${MAX_BODY_DEPTH} levels`);
  return value;
}
