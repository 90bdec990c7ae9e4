// npm start (bun run start): the API and the ingest worker in one process, on whatever is configured
// and on the embedded defaults otherwise. On a database without books it ingests the sample story
// and prints a ready-to-paste curl that chats with one of its characters.

import { loadConfigOrExit, type Config } from "../common/config.ts";
import { buildDeps, type Deps } from "../common/deps.ts";
import { SAMPLE_BOOK, seedSampleBook, type SeedOutcome } from "../ingest/sample-book.ts";
import { startWorker } from "../ingest/worker.ts";
import { DOCS_PATH } from "./docs.ts";
import { controlFilePath, findRunningInstance, startLocalControl } from "./local-control.ts";
import { findLocalChat, openLocalChat, type LocalChat } from "./local-sessions.ts";
import { startApi } from "./server.ts";

/** Asked in the printed curl when the session is not with a character of the sample story. */
const GENERIC_QUESTION = "Who are you, and what matters most to you?";

/** Single-quotes for a POSIX shell: the command is pasted as printed. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function curlCommand(apiUrl: string, chat: LocalChat, question: string): string {
  const body = {
    user_id: chat.user_id,
    character_id: chat.character_id,
    book_id: chat.book_id,
    session_id: chat.session_id,
    user_message: question,
  };
  return `curl -N ${apiUrl}/character/chat -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(body))}`;
}

interface Banner {
  apiUrl: string;
  deps: Deps;
  seed: SeedOutcome | undefined;
  chat: LocalChat | null;
  curl: string | undefined;
}

function describeMode(deps: Deps): string {
  if (deps.llm.provider === "offline") {
    return "Offline mode: no LLM gateway is configured (LLM_GATEWAY_URL), so replies are composed from the book's own lines and passages, without a model.";
  }
  return `LLM gateway: ${deps.config.llm.gatewayUrl} (chat model ${deps.config.llm.chatModel}).`;
}

/** What the person who typed `npm start` reads: where things are and how to chat. */
function readyBanner({ apiUrl, deps, seed, chat, curl }: Banner): string {
  const lines = ["", "Book character chat is ready.", "", `  API          ${apiUrl}`, `  Swagger UI   ${apiUrl}${DOCS_PATH}`];
  if (seed?.status === "ingested") {
    const names = seed.result.characters.map((c) => c.character.name).join(", ");
    lines.push(`  Sample book  "${SAMPLE_BOOK.title}" ingested: ${names}`);
  }
  lines.push(`  Data         ${deps.config.dataDir}`);
  lines.push("", describeMode(deps), "");
  if (chat && curl) {
    lines.push(
      `Chat with ${chat.character_name} ("${chat.book_title}") in the terminal:`,
      "",
      "  bun run chat",
      "",
      "or with curl:",
      "",
      `  ${curl}`,
      "",
      `Other characters: bun run chat --character <name>. Your own book: stop the service, then bun run ingest <file.txt>.`,
    );
  } else {
    lines.push(
      "No local chat session yet. Pick a book and a character in the terminal (a session is created for you):",
      "",
      "  bun run chat [--book <id|title>] [--character <name>]",
    );
  }
  lines.push("", "Ctrl-C stops the service; the data stays for the next start.", "");
  return lines.join("\n");
}

/**
 * The session the banner shows: the local reader's latest. When there is none but the sample story
 * is ours (seeded now or at an earlier start), one is created with its most important character. A
 * database with other books only is shown what it has, never given rows it did not ask for.
 */
async function preparedChat(deps: Deps, seed: SeedOutcome | undefined): Promise<LocalChat | null> {
  const latest = await findLocalChat(deps.db);
  if (latest || seed === undefined || seed.status === "skipped") return latest;
  return openLocalChat(deps.db, { book: SAMPLE_BOOK.id });
}

async function main(config: Config): Promise<void> {
  const other = await findRunningInstance(config.dataDir);
  if (other) {
    console.error(
      `another \`npm start\` (pid ${other.pid}, ${other.api_url}) is using ${config.dataDir}; stop it first, or set DATA_DIR to another folder`,
    );
    process.exit(1);
  }

  const deps = await buildDeps(config);
  const log = deps.logger.child({ component: "start" });
  let api: ReturnType<typeof startApi>;
  try {
    api = startApi(deps);
  } catch (err) {
    await deps.close();
    if ((err as { code?: unknown }).code !== "EADDRINUSE") throw err;
    console.error(`port ${config.port} is in use: stop what listens there, or set PORT to another port`);
    process.exit(1);
  }
  const { server, settle } = api;
  const apiUrl = `http://localhost:${server.port}`;
  // Announced before seeding, so that a second `npm start` on this data dir is refused from now on.
  const control = await startLocalControl(deps, { dataDir: config.dataDir, apiUrl });
  const worker = startWorker(deps);
  const seeding = new AbortController();
  let seedDone: Promise<unknown> = Promise.resolve();
  let stopping = false;

  const shutdown = async (signal: string) => {
    stopping = true;
    process.once(signal, () => process.exit(130));
    log.info("shutting down", { signal });
    seeding.abort(new Error("the service is stopping"));
    await control.stop();
    await server.stop();
    await worker.stop();
    await seedDone.catch(() => {});
    await settle();
    await deps.close();
    log.info("stopped");
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown("SIGINT"));
  process.once("SIGTERM", () => void shutdown("SIGTERM"));

  let seed: SeedOutcome | undefined;
  try {
    const started = performance.now();
    const seeded = seedSampleBook(deps, { signal: seeding.signal });
    seedDone = seeded;
    seed = await seeded;
    if (seed.status === "ingested") {
      log.info("sample story ingested", {
        book_id: SAMPLE_BOOK.id,
        characters: seed.result.characters.map((c) => c.character.name),
        seconds: Number(((performance.now() - started) / 1000).toFixed(2)),
      });
    } else if (seed.status === "skipped") log.info("sample story not added", { reason: seed.reason });
  } catch (err) {
    if (stopping) return;
    log.error("the sample story could not be ingested; the service runs without it", { error: err });
  }
  if (stopping) return;

  const chat = await preparedChat(deps, seed);
  const question = chat?.book_id === SAMPLE_BOOK.id ? SAMPLE_BOOK.question : GENERIC_QUESTION;
  const curl = chat ? curlCommand(apiUrl, chat, question) : undefined;
  log.info("ready", {
    api: apiUrl,
    docs: `${apiUrl}${DOCS_PATH}`,
    control_file: controlFilePath(config.dataDir),
    ...(chat ? { chat, curl } : {}),
  });
  // Last, so that on a terminal the banner is not buried under log lines.
  process.stdout.write(readyBanner({ apiUrl, deps, seed, chat, curl }));
}

if (import.meta.main) {
  await main(loadConfigOrExit());
}
