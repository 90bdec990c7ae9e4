// npm start (bun run start): the API and the ingest worker in one process, on whatever is configured
// and on the embedded defaults otherwise. On a database without books it ingests the sample story
// and prints a ready-to-paste curl that chats with one of its characters.

import { loadConfigOrExit, type Config } from "../common/config.ts";
import { buildDepsOrExit, type Deps } from "../common/deps.ts";
import { checkDependencies } from "../common/deps-assembly.ts";
import { SAMPLE_BOOK, seedSampleBook, type SeedOutcome } from "../ingest/sample-book.ts";
import { startWorker } from "../ingest/jobs/queue-consumer.ts";
import { DOCS_PATH } from "./docs.ts";
import { controlFilePath, findRunningInstance, startLocalControl } from "../common/local/control-file.ts";
import { findLocalChat, listChatBooks, LOCAL_USER_ID, openLocalChat, type LocalChat, type LocalChatOptions } from "../common/local/sessions.ts";
import { FRONTEND_WRITES_FLAG } from "../common/db/frontend-rows.ts";
import { startApi } from "./listen.ts";
import { PLAYGROUND_PATH } from "./playground/index.ts";
import { npmRun, usage } from "../common/cli-usage.ts";
import { listenAddress, selfFileHost, type ListenAddress } from "../common/listen-address.ts";
import { parseArgs } from "node:util";
import { onStopSignals } from "../common/stop-signals.ts";
import type { ChatRequest, ProcessingRequest } from "../common/contract/schemas.ts";
import type { RequestExamples } from "./docs.ts";
import { localFilePath } from "./local-file.ts";

/** Asked in the printed curl when the session is not with a character of the sample story. */
const GENERIC_QUESTION = "Who are you, and what matters most to you?";

/** Single-quotes for a POSIX shell: the command is pasted as printed. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function chatRequest(chat: LocalChat, question: string): ChatRequest {
  return { user_id: chat.user_id, character_id: chat.character_id, book_id: chat.book_id, session_id: chat.session_id, user_message: question };
}

function curlCommand(apiUrl: string, chat: LocalChat, question: string): string {
  return `curl -N ${apiUrl}/character/chat -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(chatRequest(chat, question)))}`;
}

/** The sample story submitted again from the file the API serves itself: it is re-ingested in place. */
function sampleSubmission(apiUrl: string): ProcessingRequest {
  return { book_id: SAMPLE_BOOK.id, user_id: LOCAL_USER_ID, file_url: `${apiUrl}${localFilePath(SAMPLE_BOOK.path)}` };
}

const USAGE = usage("start", `[${FRONTEND_WRITES_FLAG}]`);
const HELP = `${USAGE}

Starts the API and the ingest worker in one process, on whatever is configured (see docs/operations.md,
Configuration) and on embedded stores under DATA_DIR otherwise. On an empty embedded database it
ingests the sample story first and prints how to chat with it.

  ${FRONTEND_WRITES_FLAG}  allow the sample story and a local session to be written to the
                           frontend's tables of a shared (DATABASE_URL) database
  --help                   this text

Listens on HOST:PORT (127.0.0.1:3000 unless set; HOST=0.0.0.0 opens it to the network).
`;

interface Banner {
  apiUrl: string;
  address: ListenAddress;
  playground: boolean;
  deps: Deps;
  seed: SeedOutcome | undefined;
  chat: LocalChat | null;
  curl: string | undefined;
  /** The titles of the books that can be chatted about, newest first: the reader's own as well as the sample. */
  books: string[];
}

/** Books named in the banner; `npm run chat -- --book` lists them all. */
export const BANNER_BOOKS = 5;

function describeMode(deps: Deps): string {
  if (deps.llm.provider === "offline") {
    return "Offline mode: no LLM gateway is configured (LLM_GATEWAY_URL), so replies are composed from the book's own lines and passages, without a model.";
  }
  return `LLM gateway: ${deps.config.llm.gatewayUrl} (chat model ${deps.config.llm.chatModel}).`;
}

/** What the person who typed `npm start` reads: where things are and how to chat. */
function readyBanner({ apiUrl, address, playground, deps, seed, chat, curl, books }: Banner): string {
  const reach = address.network
    ? "reachable from other machines: the API has no authentication"
    : "this machine only; HOST=0.0.0.0 opens it to the network";
  const lines = ["", "Book character chat is ready.", "", `  API          ${apiUrl}`, `  Listening    ${address.bound} (${reach})`];
  if (playground) lines.push(`  Chat page    ${apiUrl}${PLAYGROUND_PATH}`);
  lines.push(`  Swagger UI   ${apiUrl}${DOCS_PATH}`);
  if (seed?.status === "ingested") {
    const names = seed.result.characters.map((c) => c.character.name).join(", ");
    lines.push(`  Sample book  "${SAMPLE_BOOK.title}" ingested: ${names}`);
  }
  if (books.length > 0) {
    const more = books.length > BANNER_BOOKS ? `, and ${books.length - BANNER_BOOKS} more` : "";
    lines.push(`  Books        ${books.slice(0, BANNER_BOOKS).map((t) => `"${t}"`).join(", ")}${more}`);
  }
  lines.push(`  Data         ${deps.config.dataDir}`);
  lines.push("", describeMode(deps), "");
  if (chat && curl) {
    lines.push(
      ...(playground ? [`Chat with ${chat.character_name} ("${chat.book_title}") in your browser at ${apiUrl}${PLAYGROUND_PATH}, in the terminal:`] : [`Chat with ${chat.character_name} ("${chat.book_title}") in the terminal:`]),
      "",
      `  ${npmRun("chat")}`,
      "",
      "or with curl:",
      "",
      `  ${curl}`,
      "",
      `Other characters: ${npmRun("chat", "--character <name>")}. Your own book: stop the service, then ${npmRun("ingest", "<file.txt>")}.`,
      "With Bun installed, `bun run chat …` and `bun run ingest …` are the same commands, without the `--`.",
    );
  } else {
    lines.push(
      "No local chat session yet. Pick a book and a character in the terminal (a session is created for you):",
      "",
      `  ${npmRun("chat", "[--book <id|title>] [--character <name>]")}`,
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
async function preparedChat(deps: Deps, seed: SeedOutcome | undefined, options: LocalChatOptions): Promise<LocalChat | null> {
  const latest = await findLocalChat(deps.db);
  if (latest || seed === undefined || seed.status === "skipped") return latest;
  return openLocalChat(deps.db, { book: SAMPLE_BOOK.id }, options);
}

async function main(config: Config, options: LocalChatOptions): Promise<void> {
  const other = await findRunningInstance(config.dataDir);
  if (other) {
    console.error(
      `another \`npm start\` (pid ${other.pid}, ${other.api_url}) is using ${config.dataDir}; stop it first, or set DATA_DIR to another folder`,
    );
    process.exit(1);
  }

  // On loopback the API serves the sample story's file and may download it from itself (API and
  // worker alike), so that POST /character/processing can be tried here; on a network address nothing
  // is served and the file_url address policy is the configured one.
  const selfHost = selfFileHost(config.host, config.port);
  const deps = await buildDepsOrExit(selfHost ? { ...config, fileUrlAllowedHosts: [...config.fileUrlAllowedHosts, selfHost] } : config);
  const playground = config.playground ?? true;
  // Once the banner's session and the sample book are known, Swagger UI's "Try it out" sends them.
  let docsExamples: RequestExamples = {};
  const log = deps.logger.child({ component: "start" });
  let api: ReturnType<typeof startApi>;
  try {
    api = startApi(deps, {
      ...(playground ? { playground: options } : {}),
      ...(selfHost ? { localFile: SAMPLE_BOOK.path } : {}),
      requestExamples: () => docsExamples,
    });
  } catch (err) {
    await deps.close();
    if ((err as { code?: unknown }).code !== "EADDRINUSE") throw err;
    console.error(`port ${config.port} is in use: stop what listens there, or set PORT to another port`);
    process.exit(1);
  }
  const { server, settle } = api;
  void checkDependencies(deps);
  const address = listenAddress(config.host, server.port!);
  const apiUrl = address.url;
  // Announced before seeding, so that a second `npm start` on this data dir is refused from now on.
  const control = await startLocalControl(deps, { dataDir: config.dataDir, apiUrl, ...options });
  const worker = startWorker(deps);
  const seeding = new AbortController();
  let seedDone: Promise<unknown> = Promise.resolve();
  let stopping = false;

  const shutdown = async (signal: string) => {
    stopping = true;
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
  onStopSignals((signal) => void shutdown(signal));

  let seed: SeedOutcome | undefined;
  try {
    const started = performance.now();
    const seeded = seedSampleBook(deps, { signal: seeding.signal, ...options });
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

  const chat = await preparedChat(deps, seed, options);
  const question = chat?.book_id === SAMPLE_BOOK.id ? SAMPLE_BOOK.question : GENERIC_QUESTION;
  const curl = chat ? curlCommand(apiUrl, chat, question) : undefined;
  docsExamples = {
    ...(chat ? { chat: chatRequest(chat, question) } : {}),
    ...(selfHost && (seed?.status === "ingested" || seed?.status === "present") ? { processing: sampleSubmission(apiUrl) } : {}),
  };
  log.info("ready", {
    api: apiUrl,
    address: address.bound,
    docs: `${apiUrl}${DOCS_PATH}`,
    control_file: controlFilePath(config.dataDir),
    ...(chat ? { chat, curl } : {}),
  });
  // Last, so that on a terminal the banner is not buried under log lines.
  const books = (await listChatBooks(deps.db)).map((b) => b.title);
  process.stdout.write(readyBanner({ apiUrl, address, playground, deps, seed, chat, curl, books }));
}

/** The options after `npm start --`, or an exit with the usage (status 0 for --help). */
function parseOptions(argv: string[]): LocalChatOptions {
  try {
    const { values } = parseArgs({ args: argv, options: { help: { type: "boolean" }, [FRONTEND_WRITES_FLAG.slice(2)]: { type: "boolean" } } });
    if (values.help) {
      process.stdout.write(HELP);
      process.exit(0);
    }
    return { writeFrontendTables: values[FRONTEND_WRITES_FLAG.slice(2)] === true };
  } catch (err) {
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    process.exit(2);
  }
}

if (import.meta.main) {
  const options = parseOptions(process.argv.slice(2));
  await main(loadConfigOrExit(), options);
}
