import type { ErrorBody } from "./contract/schemas.ts";
import type { Logger } from "./log.ts";

/** The whole answer to a request whose handler failed unexpectedly: no stack, no path, no source line. */
export const INTERNAL_ERROR = "internal error";

const internalErrorResponse = () => Response.json({ error: INTERNAL_ERROR } satisfies ErrorBody, { status: 500 });

/** A request that failed unexpectedly: logged as one line (with `fields`), answered with `{error}` and nothing more. */
export function unhandledFailure(logger: Logger, request: Request, error: unknown, fields: Record<string, unknown> = {}): Response {
  logger.error("unhandled error", { method: request.method, url: request.url, ...fields, error });
  return internalErrorResponse();
}

/**
 * The error handling of every HTTP server here (Bun.serve, Deno.serve): production mode, because
 * Bun's development mode (its default) answers a thrown error with a page of source lines, the
 * working directory and file paths, and prints the stack as many lines past the configured log
 * format; and whatever is thrown past the handler answered with `{error}` and logged as one line.
 */
export function serverErrorHandling(logger: Logger) {
  return {
    development: false,
    error(error: unknown): Response {
      logger.error("request failed", { error });
      return internalErrorResponse();
    },
  } as const;
}
