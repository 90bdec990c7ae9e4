// npm run chat -- [--book <id|title>] [--character <name>] [--position <0-1> | --page <n>]   (bun run chat [...] with Bun installed)
//
// Chats with a character from the terminal. Finds or creates the local reader's session, sends each
// line typed to POST /character/chat and prints the reply as its tokens arrive, like any client of
// the SSE endpoint. It talks to the service `npm start` runs on this DATA_DIR, or to an API at
// http://localhost:$PORT; with neither running, it builds the API in this process.

import { parseArgs } from "node:util";
import { loadConfigOrExit, secretsOf, type Config } from "../common/config.ts";
import { buildDepsOrExit } from "../common/deps.ts";
import { FRONTEND_WRITES_FLAG } from "../common/db/frontend-rows.ts";
import { terminalLogger } from "../common/local/terminal-log.ts";
import { npmRun, usage } from "../common/cli-usage.ts";
import { join } from "node:path";
import { listenAddress } from "../common/listen-address.ts";
import type { ChatRequest } from "../common/contract/schemas.ts";
import { createApp } from "./app.ts";
import { findRunningInstance, requestLocalChat } from "../common/local/control-file.ts";
import { openLocalChat, type LocalChat, type LocalChatOptions, type LocalChoice } from "../common/local/sessions.ts";
import { readChatEvents } from "./sse-client.ts";

const USAGE = usage("chat", `[--book <id|title>] [--character <name>] [--position <0-1> | --page <n>] [${FRONTEND_WRITES_FLAG}]`);
const HELP = `${USAGE}

Chat with a character of an ingested book in the terminal. Finds (or creates) the local reader's
session and prints each reply as it streams from POST /character/chat. With no option it continues
the last session used.

  --book <id|title>        the book (case does not matter; a leading "The" may be left out)
  --character <name>       the character, by name or alias ("queen" finds "The Queen")
  --position <0-1>         how far you have read, as a share of the book (0.3: 30 %); the character
                           knows the story up to there and the passages stop there
  --page <n>               the same as a page of the book's page count (books.page_count)
  ${FRONTEND_WRITES_FLAG}  allow a new session to be written to the frontend's tables of a
                           shared (DATABASE_URL) database
  --help                   this text

Talks to the \`npm start\` running on DATA_DIR, or to an API at HOST:PORT (127.0.0.1:3000); with neither
running it serves the chat in this process. Warnings show as one line; details go to $DATA_DIR/chat.log.
`;
const HEALTH_TIMEOUT_MS = 2_000;
const QUIT_COMMANDS = new Set(["/quit", "/exit"]);

type Fetch = (request: Request) => Promise<Response>;

/** Where the conversation goes: a running service, or the API built in this process. */
interface ChatTarget {
  /** Shown to the reader. */
  description: string;
  apiUrl: string;
  fetch: Fetch;
  openChat(choice: LocalChoice): Promise<LocalChat>;
  close(): Promise<void>;
}

class CliError extends Error {}

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) })).ok;
  } catch {
    return false;
  }
}

async function connect(config: Config, options: LocalChatOptions): Promise<ChatTarget> {
  const running = await findRunningInstance(config.dataDir);
  if (running) {
    return {
      description: `the service at ${running.api_url}`,
      apiUrl: running.api_url,
      fetch: (request) => fetch(request),
      openChat: (choice) => requestLocalChat(running, choice),
      close: async () => {},
    };
  }
  const apiUrl = listenAddress(config.host, config.port).url;
  const apiRunning = await answers(`${apiUrl}/health`);
  if (apiRunning && config.database.driver === "pglite") {
    throw new CliError(
      `an API answers at ${apiUrl}, but it was not started with \`npm start\` on ${config.dataDir}, and the embedded database ` +
        "can be used by one process only. Start the service with `npm start`, or stop that API to chat without it.",
    );
  }
  const logger = terminalLogger({
    file: join(config.dataDir, "chat.log"),
    level: config.logLevel,
    secrets: secretsOf(config),
    print: (line) => process.stderr.write(`${line}\n`),
  });
  const deps = await buildDepsOrExit(config, { logger });
  const openChat = (choice: LocalChoice) => openLocalChat(deps.db, choice, options);
  if (apiRunning) return { description: `the API at ${apiUrl}`, apiUrl, fetch: (request) => fetch(request), openChat, close: deps.close };
  const { fetch: handle, settle } = createApp(deps);
  const offline = deps.llm.provider === "offline" ? ", offline provider" : "";
  return {
    description: `this process (no service is running${offline})`,
    apiUrl,
    fetch: handle,
    openChat,
    async close() {
      await settle();
      await deps.close();
    },
  };
}

export interface Terminal {
  lines: AsyncIterable<string>;
  write(text: string): void;
  error(text: string): void;
  /** Show a prompt before each line (an interactive terminal). */
  prompt: boolean;
}

/** How far the reader has read, as given: a share of the book, or a page of its page count. */
type ReadingChoice = { position: number } | { page: number } | undefined;

/** The option as a number, or an error naming what it must be. */
function readingChoice(position: string | undefined, page: string | undefined): ReadingChoice {
  if (position !== undefined && page !== undefined) throw new Error("give --position or --page, not both");
  if (position !== undefined) {
    const value = Number(position);
    if (position.trim() === "" || !Number.isFinite(value) || value < 0 || value > 1) throw new Error(`--position must be a number from 0 to 1 (0.3 is 30 %), not "${position}"`);
    return { position: value };
  }
  if (page !== undefined) {
    const value = Number(page);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--page must be a whole number from 1, not "${page}"`);
    return { page: value };
  }
  return undefined;
}

/** The reading_position the turns send: a page becomes its share of the book's pages. */
function readingPosition(choice: ReadingChoice, chat: LocalChat): number | undefined {
  if (choice === undefined) return undefined;
  if ("position" in choice) return choice.position;
  if (chat.page_count === null || chat.page_count <= 0) throw new CliError(`"${chat.book_title}" has no page count: give --position <0-1> instead of --page`);
  if (choice.page > chat.page_count) throw new CliError(`--page ${choice.page} is past the last page of "${chat.book_title}" (${chat.page_count})`);
  return choice.page / chat.page_count;
}

/** Sends one message and prints the reply as it streams; false when no reply was completed. */
async function sendMessage(target: ChatTarget, chat: LocalChat, message: string, position: number | undefined, terminal: Terminal, signal: AbortSignal): Promise<boolean> {
  const body: ChatRequest = {
    user_id: chat.user_id,
    character_id: chat.character_id,
    book_id: chat.book_id,
    session_id: chat.session_id,
    user_message: message,
    ...(position === undefined ? {} : { reading_position: position }),
  };
  const response = await target.fetch(
    new Request(`${target.apiUrl}/character/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal,
    }),
  );
  if (!response.ok || !response.body) {
    const error = ((await response.json().catch(() => ({}))) as { error?: unknown }).error;
    terminal.error(`error: HTTP ${response.status}${typeof error === "string" ? `: ${error}` : ""}\n`);
    return false;
  }
  terminal.write(`${chat.character_name}: `);
  for await (const event of readChatEvents(response.body)) {
    if ("token" in event) terminal.write(event.token);
    else if ("done" in event) {
      terminal.write("\n\n");
      return true;
    } else {
      terminal.write("\n");
      terminal.error(`error ${event.code}: ${event.error}\n\n`);
      return false;
    }
  }
  // Built in this process, the API ends the stream quietly when the reader interrupts it.
  signal.throwIfAborted();
  terminal.write("\n");
  terminal.error("error: the reply stream ended before the reply was complete\n\n");
  return false;
}

export async function main(argv: string[], terminal: Terminal): Promise<number> {
  let choice: LocalChoice;
  let reading: ReadingChoice;
  let writeFrontendTables = false;
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        help: { type: "boolean" },
        book: { type: "string" },
        character: { type: "string" },
        position: { type: "string" },
        page: { type: "string" },
        [FRONTEND_WRITES_FLAG.slice(2)]: { type: "boolean" },
      },
    });
    if (values.help) {
      terminal.write(HELP);
      return 0;
    }
    if (positionals.length > 0) throw new Error(`unexpected argument: ${positionals[0]} (options go after \`--\` with npm: ${npmRun("chat", "--character <name>")})`);
    choice = { book: values.book, character: values.character };
    reading = readingChoice(values.position, values.page);
    writeFrontendTables = values[FRONTEND_WRITES_FLAG.slice(2)] === true;
  } catch (err) {
    terminal.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    return 2;
  }

  const config = loadConfigOrExit();
  let target: ChatTarget;
  try {
    target = await connect(config, { writeFrontendTables });
  } catch (err) {
    terminal.error(`${err instanceof CliError ? err.message : `could not start: ${err instanceof Error ? err.message : String(err)}`}\n`);
    return 1;
  }
  let replying: AbortController | undefined;
  // Ctrl-C stops the reply being written; between replies it ends the chat.
  const interrupt = () => {
    if (replying) replying.abort(new Error("interrupted"));
    else void target.close().finally(() => process.exit(130));
  };
  process.on("SIGINT", interrupt);
  try {
    let chat: LocalChat;
    let position: number | undefined;
    try {
      chat = await target.openChat(choice);
      position = readingPosition(reading, chat);
    } catch (err) {
      terminal.error(`${err instanceof Error ? err.message : String(err)}\n`);
      return 1;
    }
    const picked = [
      choice.book !== undefined && choice.book !== chat.book_title && choice.book !== chat.book_id ? `"${choice.book}" is "${chat.book_title}"` : "",
      choice.character !== undefined && choice.character !== chat.character_name ? `"${choice.character}" is ${chat.character_name}` : "",
    ].filter(Boolean);
    if (picked.length > 0) terminal.write(`${picked.join("; ")}.\n`);
    const earlier = chat.message_count === 1 ? "1 earlier exchange" : `${chat.message_count} earlier exchanges`;
    const read = position === undefined ? "" : `, read to ${Math.round(position * 1000) / 10} %`;
    terminal.write(
      `Chatting with ${chat.character_name} in "${chat.book_title}" (session ${chat.session_id}, ${earlier}${read}) through ${target.description}.\n` +
        "Type a message and press Enter; Ctrl-D or /quit ends the chat.\n\n",
    );
    let failures = 0;
    if (terminal.prompt) terminal.write("you> ");
    for await (const line of terminal.lines) {
      const message = line.trim();
      if (QUIT_COMMANDS.has(message)) break;
      if (message !== "") {
        replying = new AbortController();
        try {
          if (!(await sendMessage(target, chat, message, position, terminal, replying.signal))) failures++;
        } catch (err) {
          failures++;
          terminal.write("\n");
          terminal.error(replying.signal.aborted ? "(reply interrupted)\n\n" : `error: ${err instanceof Error ? err.message : String(err)}\n\n`);
        } finally {
          replying = undefined;
        }
      }
      if (terminal.prompt) terminal.write("you> ");
    }
    return failures > 0 ? 1 : 0;
  } finally {
    process.off("SIGINT", interrupt);
    await target.close();
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2), {
    lines: console,
    write: (text) => process.stdout.write(text),
    error: (text) => process.stderr.write(text),
    prompt: process.stdin.isTTY === true,
  });
}
