import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SAMPLE_BOOK } from "../../ingest/sample-book.ts";
import { startDemo, type Demo } from "../support/npm-start.ts";
import { REPO_ROOT, startService } from "../support/process.ts";

// The suite starts `npm start` (initdb on first use) and several chat processes.
setDefaultTimeout(180_000);

interface ChatRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** `bun run chat` with the lines typed on its standard input, then end of input (Ctrl-D). */
async function chat(env: Record<string, string>, args: string[], lines: string[]): Promise<ChatRun> {
  const proc = Bun.spawn([process.execPath, "run", "chat", ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    timeout: 120_000,
  });
  for (const line of lines) proc.stdin.write(`${line}\n`);
  await proc.stdin.end();
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

/** The replies printed after "<name>: ", one per message. */
function replies(stdout: string, name: string): string[] {
  return stdout
    .split(`\n${name}: `)
    .slice(1)
    .map((r) => r.trim());
}

let dataDir: string;
let story: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "chat-cli-"));
  story = await readFile(SAMPLE_BOOK.path, "utf8");
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

/**
 * The opening of a reply: offline, the character's own words from the story. A line the story splits
 * with its dialogue tag ("…1891," said Ottilie, "and a library…") is said whole, its comma a full stop
 * where the tag ended the sentence, so each piece of the opening between punctuation is looked for in
 * the story on its own.
 */
function expectFromTheStory(reply: string) {
  const opening = reply.split("\n")[0]!.slice(0, 40);
  expect(opening.length).toBe(40);
  const text = story.replace(/\s+/g, " ");
  for (const piece of opening.split(/[,.!?]/).map((p) => p.trim()).filter((p) => p.length > 0)) expect(text).toContain(piece);
}

describe("bun run chat while npm start runs", () => {
  let demo: Demo;
  let env: Record<string, string>;
  beforeAll(async () => {
    demo = await startDemo(dataDir);
    env = { PORT: new URL(demo.service.url).port, DATA_DIR: dataDir };
  });
  afterAll(async () => {
    await demo?.service.stop();
  });

  test("streams the character's replies to lines typed in the terminal, in the session npm start printed", async () => {
    const run = await chat(env, [], ["What did you find hidden in the diary?", "", "Why do you always start at the spine?"]);
    expect({ exitCode: run.exitCode, stderr: run.stderr.replace(/^\$ .*\n/gm, "") }).toEqual({ exitCode: 0, stderr: "" });
    const name = demo.ready.chat!.character_name;
    expect(run.stdout).toContain(
      `Chatting with ${name} in "${SAMPLE_BOOK.title}" (session ${demo.ready.chat!.session_id}, 0 earlier exchanges) through the service at ${demo.ready.api}.`,
    );
    const answers = replies(run.stdout, name);
    expect(answers).toHaveLength(2);
    for (const answer of answers) expectFromTheStory(answer);
    expect(answers[0]).not.toBe(answers[1]);
  });

  test("another character gets a session of its own, which the next chat with it continues", async () => {
    const first = await chat(env, ["--character", "jonah pike"], ["Who is Mr. Crane?"]);
    expect(first.exitCode).toBe(0);
    const session = /\(session ([0-9a-f-]{36}), 0 earlier exchanges\)/.exec(first.stdout)?.[1];
    expect(session).toBeDefined();
    expect(session).not.toBe(demo.ready.chat!.session_id);
    expect(replies(first.stdout, "Jonah")).toHaveLength(1);

    const again = await chat(env, ["--book", SAMPLE_BOOK.title, "--character", "Jonah"], ["/quit", "never sent"]);
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain(`(session ${session}, 1 earlier exchange)`);
    expect(replies(again.stdout, "Jonah")).toEqual([]);
  });

  test("a character the book does not have is refused with the list of those it has", async () => {
    const run = await chat(env, ["--character", "Hester"], ["hello"]);
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain(`"${SAMPLE_BOOK.title}" has no character called "Hester". Its characters:\n  Ottilie (`);
    expect(run.stdout).toBe("");
  });
});

describe("bun run chat with no service running", () => {
  test("builds the API in its own process and streams the reply the same way", async () => {
    const run = await chat({ DATA_DIR: dataDir }, ["--character", "Mr. Crane"], ["What was in your parcel?"]);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain('Chatting with Mr. Crane in "The Mending Room"');
    expect(run.stdout).toContain("through this process (no service is running, offline provider).");
    const [answer] = replies(run.stdout, "Mr. Crane");
    expectFromTheStory(answer!);
  });

  test("refuses to open the embedded database an API started without npm start is using", async () => {
    const api = await startService("api/server.ts", { DATA_DIR: dataDir });
    try {
      const run = await chat({ PORT: new URL(api.url).port, DATA_DIR: dataDir }, [], ["hello"]);
      expect(run.exitCode).toBe(1);
      expect(run.stderr).toContain("the embedded database can be used by one process only");
    } finally {
      await api.stop();
    }
  });

  test("--position sends how far the reader has read with every turn: at 0 the reply has no passage", async () => {
    const run = await chat({ DATA_DIR: dataDir }, ["--character", "Mr. Crane", "--position", "0"], ["What was in your parcel?"]);
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain(", read to 0 %) through this process");
    const session = /\(session ([0-9a-f-]{36}),/.exec(run.stdout)?.[1];
    const log = await readFile(join(dataDir, "chat.log"), "utf8");
    const turnLine = log.split("\n").findLast((l) => l.includes("chat turn") && l.includes(`session_id=${session}`));
    expect(turnLine).toContain("reading_position=0 ");
    expect(log).toContain("reason=before_first_passage");
  });

  test("--page needs the book's page count, and a bad --position or --page is refused before anything starts", async () => {
    const paged = await chat({ DATA_DIR: dataDir }, ["--character", "Mr. Crane", "--page", "3"], ["hello"]);
    expect(paged.exitCode).toBe(1);
    expect(paged.stderr).toContain(`"${SAMPLE_BOOK.title}" has no page count: give --position <0-1> instead of --page`);
    for (const [args, message] of [
      [["--position", "30"], '--position must be a number from 0 to 1 (0.3 is 30 %), not "30"'],
      [["--position", "half"], '--position must be a number from 0 to 1 (0.3 is 30 %), not "half"'],
      [["--page", "0"], '--page must be a whole number from 1, not "0"'],
      [["--position", "0.5", "--page", "2"], "give --position or --page, not both"],
    ] as const) {
      const run = await chat({ DATA_DIR: dataDir }, [...args], ["hello"]);
      expect({ exitCode: run.exitCode, first: run.stderr.replace(/^\$ .*\n/gm, "").split("\n")[0] }).toEqual({ exitCode: 2, first: message });
    }
  });

  test("explains its usage when given an argument it does not know", async () => {
    const run = await chat({ DATA_DIR: dataDir }, ["--voice", "loud"], []);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain("usage: npm run chat -- [--book <id|title>] [--character <name>]");
    expect(run.stderr).toContain("bun run chat [--book <id|title>] [--character <name>]");
  });
});
