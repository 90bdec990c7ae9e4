import { basename } from "node:path";
import { Elysia } from "elysia";

/**
 * A book file the API serves to itself on a laptop (`npm start` on loopback: the sample story), so that
 * `POST /character/processing` can be tried there with a `file_url` that downloads. A local convenience
 * like the chat page's helper routes: left out of the OpenAPI document, never mounted by `npm run api`.
 */

export const LOCAL_FILES_PATH = "/local-files";

/** The path the file is served at: its own name under LOCAL_FILES_PATH. */
export function localFilePath(filePath: string): string {
  return `${LOCAL_FILES_PATH}/${encodeURIComponent(basename(filePath))}`;
}

export function localFileRoute(filePath: string) {
  return new Elysia({ name: "local-file" }).get(
    localFilePath(filePath),
    () => new Response(Bun.file(filePath), { headers: { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" } }),
    { detail: { hide: true } },
  );
}
