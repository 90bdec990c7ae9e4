import type { z } from "zod";

/** `raw` as JSON of `schema`'s shape, or null when it is empty, not JSON or of another shape (a stored value never trusted). */
export function jsonAs<T>(schema: z.ZodType<T>, raw: string | null | undefined): T | null {
  if (!raw) return null;
  try {
    const parsed = schema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
