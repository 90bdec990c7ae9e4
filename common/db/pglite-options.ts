import { PGlite, type PGliteOptions } from "@electric-sql/pglite";
import { TYPE_PARSERS } from "./adapter-support.ts";

/**
 * Postgres's default buffer cache (128 MB) sits in PGlite's heap from the start; the embedded
 * database holds one reader's books and chats, which 16 MB caches, and it saves about 115 MiB of
 * RSS in every process that opens it (the API and each ingest worker).
 */
export const PGLITE_SHARED_BUFFERS = "16MB";

/** What every PGlite this project opens is created with, on the main thread (pglite.ts) or in a worker (pglite-thread.ts). */
export function pgliteCreateOptions(dataDir: string | undefined): PGliteOptions {
  return {
    ...(dataDir ? { dataDir } : {}),
    parsers: TYPE_PARSERS,
    startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${PGLITE_SHARED_BUFFERS}`],
  };
}
