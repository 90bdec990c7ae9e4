import { HttpError } from "./errors.ts";

/**
 * The JSON body parser of the POST routes. A body over MAX_REQUEST_BODY_BYTES is refused here with
 * 413 and `{error}` like every other refusal (the server's own limit would answer with an empty
 * body): by its declared length before anything is read, or, when chunked, as soon as it has sent
 * one byte too many. Our request bodies are flat objects; a body nested thousands of levels deep is
 * refused too, because the framework's validation error serialises the value it refused
 * recursively and would overflow the stack on it (a 500 instead of a 400).
 */

export const MAX_REQUEST_BODY_BYTES = 1024 * 1024;
export const MAX_BODY_DEPTH = 64;

const tooLarge = () => new HttpError(413, `request body is larger than ${MAX_REQUEST_BODY_BYTES} bytes`);

/** The body as text, never holding more than `limit` bytes of it. */
async function readLimited(request: Request, limit: number): Promise<string> {
  if (Number(request.headers.get("content-length")) > limit) throw tooLarge();
  if (!request.body) return "";
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw tooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
}

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
  const text = await readLimited(request, MAX_REQUEST_BODY_BYTES);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpError(400, "body is not valid JSON");
  }
  if (nestsDeeperThan(value, MAX_BODY_DEPTH)) throw new HttpError(400, `body is nested deeper than ${MAX_BODY_DEPTH} levels`);
  return value;
}
