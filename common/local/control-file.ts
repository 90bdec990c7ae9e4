import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { Database } from "../db/index.ts";
import { serverErrorHandling } from "../http-server.ts";
import type { Logger } from "../log.ts";
import { LocalChoiceError, openLocalChat, type LocalChat, type LocalChatOptions, type LocalChoice } from "./sessions.ts";

/**
 * How `bun run chat` reaches the database of a running `npm start`. The embedded database (PGlite)
 * belongs to one process: a second process opening the same data dir does not fail, it silently
 * works on its own copy and the two diverge. So while `npm start` runs, the terminal chat asks it to
 * find or create the session, through a small loopback-only server whose address `npm start` writes
 * to `$DATA_DIR/local-control.json`. The chat itself then goes to the public API like any client.
 * The file also stops a second `npm start` from opening a data dir that one already uses.
 */

export const CONTROL_FILE_NAME = "local-control.json";
export const SESSION_PATH = "/local/chat-session";
const CLIENT_TIMEOUT_MS = 5_000;

const ControlFile = z.object({ pid: z.number().int(), api_url: z.string(), control_url: z.string() });
export type ControlFile = z.infer<typeof ControlFile>;

const LocalChatBody = z.object({
  user_id: z.string(),
  book_id: z.string(),
  book_title: z.string(),
  character_id: z.string(),
  character_name: z.string(),
  session_id: z.string(),
  message_count: z.number(),
  page_count: z.number().nullable().default(null),
}) satisfies z.ZodType<LocalChat>;

const ChoiceBody = z.object({ book: z.string().optional(), character: z.string().optional() });

export const controlFilePath = (dataDir: string) => join(dataDir, CONTROL_FILE_NAME);

export interface LocalControl {
  url: string;
  stop(): Promise<void>;
}

/** Serves session look-ups on 127.0.0.1 (a free port) and announces the server in the data dir. */
export async function startLocalControl(deps: { db: Database; logger: Logger }, options: { dataDir: string; apiUrl: string } & LocalChatOptions): Promise<LocalControl> {
  const log = deps.logger.child({ component: "local-control" });
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      if (new URL(request.url, "http://127.0.0.1").pathname !== SESSION_PATH) return Response.json({ error: "not found" }, { status: 404 });
      if (request.method !== "POST") return Response.json({ error: "method not allowed" }, { status: 405 });
      const choice = ChoiceBody.safeParse(await request.json().catch(() => undefined));
      if (!choice.success) return Response.json({ error: "body must be {book?: string, character?: string}" }, { status: 400 });
      try {
        return Response.json(await openLocalChat(deps.db, choice.data, options));
      } catch (err) {
        if (err instanceof LocalChoiceError) return Response.json({ error: err.message }, { status: 404 });
        log.error("session look-up failed", { error: err });
        return Response.json({ error: "database unavailable" }, { status: 500 });
      }
    },
    ...serverErrorHandling(log),
  });
  const url = `http://127.0.0.1:${server.port}`;
  const file = controlFilePath(options.dataDir);
  const record: ControlFile = { pid: process.pid, api_url: options.apiUrl, control_url: url };
  // With every store configured, nothing else may have created the data dir.
  await mkdir(options.dataDir, { recursive: true });
  await writeFile(file, `${JSON.stringify(record)}\n`);
  return {
    url,
    async stop() {
      await server.stop(true);
      // Only our own announcement: a later process may have replaced a stale one.
      if ((await readControlFile(options.dataDir))?.pid === process.pid) await rm(file, { force: true });
    },
  };
}

async function readControlFile(dataDir: string): Promise<ControlFile | undefined> {
  try {
    const parsed = ControlFile.safeParse(JSON.parse(await readFile(controlFilePath(dataDir), "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A running `npm start` on this data dir, or undefined (none, or a file left by one that was killed). */
export async function findRunningInstance(dataDir: string): Promise<ControlFile | undefined> {
  const record = await readControlFile(dataDir);
  if (!record || record.pid === process.pid || !isAlive(record.pid)) return undefined;
  try {
    // Any answer proves the server is there; an empty choice would create a session, so ask with GET.
    await fetch(`${record.control_url}${SESSION_PATH}`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });
    return record;
  } catch {
    return undefined;
  }
}

/** Asks a running `npm start` for the local session; LocalChoiceError when the choice names nothing. */
export async function requestLocalChat(instance: ControlFile, choice: LocalChoice): Promise<LocalChat> {
  const response = await fetch(`${instance.control_url}${SESSION_PATH}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(choice),
    signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
  });
  const body: unknown = await response.json().catch(() => undefined);
  if (response.status === 404) throw new LocalChoiceError(z.object({ error: z.string() }).parse(body).error);
  if (!response.ok) throw new Error(`the running service could not open a session (HTTP ${response.status})`);
  return LocalChatBody.parse(body);
}
