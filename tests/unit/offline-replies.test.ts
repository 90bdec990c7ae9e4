import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../api/app.ts";
import { openLocalChat, type LocalChat } from "../../common/local/sessions.ts";
import { loadConfig } from "../../common/config.ts";
import { insertBook } from "../../common/db/frontend-rows.ts";
import { buildDeps, type Deps } from "../../common/deps.ts";
import { silentLogger } from "../../common/log.ts";
import type { ChatRequest } from "../../common/contract/schemas.ts";
import { runPipeline } from "../../ingest/pipeline.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";
import { readSse } from "../support/chat.ts";

/**
 * What a reader gets from the offline provider (no keys, no model), measured: one session per book,
 * a written-down list of questions asked in order, and every reply judged by one rule.
 *
 * A reply PASSES when all of these hold:
 *  1. relevant: the character's line (the reply before "As the book tells it") contains one of the
 *     question's key terms (written below, matched as the start of a word, case aside);
 *  2. the book's own text: every sentence of the line and of the excerpt is found verbatim in the book
 *     (whitespace, quotation marks and the punctuation where the reply cut it aside), so nothing was re-joined from tokens ("could n’t") or invented;
 *  3. whole: the line and the excerpt end at a sentence end, never mid-word;
 *  4. fresh: the line was not said in any of the session's previous five replies.
 * The README's table ("Offline replies") is this test's output.
 */

// Ingests Alice's Adventures in Wonderland on the embedded stores and chats 40-odd turns.
setDefaultTimeout(300_000);

interface Question {
  ask: string;
  /** Words a relevant line contains (a prefix of a word of it). */
  keys: string[];
}

const MENDING_ROOM: Question[] = [
  { ask: "What did you find hidden in the diary?", keys: ["card", "slip", "library", "spine", "hidden", "note", "sewn"] },
  { ask: "Why do you always start at the spine?", keys: ["spine", "secret"] },
  { ask: "What did you think of the man with the fur collar?", keys: ["fur", "notice"] },
  { ask: "Can the diary be ready by Friday?", keys: ["friday", "monday", "hurry", "glue"] },
  { ask: "What does a book that has been under water remember?", keys: ["water", "drown", "forget", "wet"] },
  { ask: "Who sewed the book again with cotton?", keys: ["cotton", "thread", "sew", "careless", "hurried"] },
  { ask: "Why did Mr. Crane pay the bill?", keys: ["pay", "customer", "thief"] },
  { ask: "Are you a magistrate?", keys: ["magistrate", "bookbinder", "accuse"] },
  { ask: "What will you do with the book now?", keys: ["library", "carry", "work", "dry", "sew"] },
  { ask: "Is Hester Vane funny?", keys: ["funny", "paper", "impress", "people"] },
  { ask: "What kind of thread did the first maker use?", keys: ["linen", "thread", "stations", "maker"] },
  { ask: "What did you tell Jonah to do with his hands?", keys: ["wash", "hands", "careful", "watching"] },
  { ask: "What do you make of Mr. Crane's flattery?", keys: ["nearest", "whoever", "say", "face"] },
  { ask: "Who really owns the diary?", keys: ["library", "harrow", "hester", "town"] },
  { ask: "Is a face a contract?", keys: ["face", "contract"] },
  { ask: "Where did the library put its wet books after the flood?", keys: ["yard", "flood", "wet", "library"] },
  { ask: "Should a book be punished for who carried it?", keys: ["punish", "carried", "book"] },
  { ask: "How much is the bill?", keys: ["shilling", "sixpence", "bill"] },
  { ask: "Can you make the book look as if it had never been wet?", keys: ["wet", "liar", "drowned", "saved", "look"] },
  { ask: "What is the cover of a book for?", keys: ["clothes", "cover"] },
  { ask: "How did you know someone had been inside the book before you?", keys: ["thread", "cotton", "someone", "sewn", "inside"] },
  { ask: "Do you think Mr. Crane is a thief?", keys: ["thief", "customer", "runs", "accuse"] },
];

const ALICE: Question[] = [
  { ask: "Why did you follow the White Rabbit?", keys: ["rabbit", "watch", "late", "curious"] },
  { ask: "What happened when you drank from the little bottle?", keys: ["drink", "bottle", "shut", "telescope", "small", "curious"] },
  { ask: "What did the Caterpillar ask you?", keys: ["caterpillar", "who are you", "size", "changed"] },
  { ask: "Tell me about the Cheshire Cat.", keys: ["cat", "grin", "vanish", "mad"] },
  { ask: "What was the Mad Tea-Party like?", keys: ["tea", "hatter", "hare", "dormouse", "riddle", "time"] },
  { ask: "How did the Queen play croquet?", keys: ["croquet", "flamingo", "hedgehog", "queen", "game"] },
  { ask: "What did the Duchess do with the baby?", keys: ["baby", "pig", "duchess", "sneez"] },
  { ask: "Who stole the tarts?", keys: ["tart", "knave", "stole"] },
  { ask: "Why were you swimming in a pool of tears?", keys: ["tears", "pool", "cry", "swim", "drown"] },
  { ask: "What did the Mock Turtle tell you about school?", keys: ["turtle", "school", "lesson"] },
  { ask: "What is the Lobster Quadrille?", keys: ["lobster", "quadrille", "dance"] },
  { ask: "Which side of the mushroom made you grow?", keys: ["mushroom", "side", "grow", "taller"] },
  { ask: "What did you say at the trial?", keys: ["trial", "jury", "evidence", "witness", "nonsense", "king"] },
  { ask: "Do you miss Dinah?", keys: ["dinah", "cat", "mice"] },
  { ask: "What did the Mouse tell you about history?", keys: ["mouse", "history", "dry", "tale"] },
  { ask: "Who is the Gryphon?", keys: ["gryphon"] },
  { ask: "Why is a raven like a writing-desk?", keys: ["raven", "riddle", "writing", "answer"] },
  { ask: "What was behind the little door with the golden key?", keys: ["key", "door", "garden"] },
  { ask: "Why were the gardeners painting the roses red?", keys: ["rose", "paint", "red", "garden"] },
  { ask: "Who are you, really?", keys: ["who", "myself", "changed", "mabel", "ada"] },
  { ask: "Are you afraid of the Queen?", keys: ["queen", "afraid", "head", "cards"] },
  { ask: "How did the adventure end?", keys: ["cards", "dream", "pack", "woke", "sister"] },
];

const ALICE_PATH = join(import.meta.dir, "..", "..", "..", "shared", "books", "pg11_alices_adventures_in_wonderland.txt");

const SEAM = /\w (?:n['’]t|['’](?:s|t|d|ll|re|ve|m))\b|\w [,.;:!?](?:\s|$)/;
const SENTENCE_END = /[.!?…]["”’)]*$/;
const RECENT_REPLIES = 5;

export interface Judged {
  ask: string;
  line: string;
  excerpt: string;
  relevant: boolean;
  fromBook: boolean;
  whole: boolean;
  fresh: boolean;
}

const flat = (text: string) => text.replace(/\s+/g, " ").trim();
const words = (text: string) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);

/** The character's line and the cited excerpt of a reply. */
function partsOf(reply: string): { line: string; excerpt: string } {
  const [line = "", rest = ""] = reply.split(/\n\n(?:As the book tells it|The book tells it this way):\n/);
  return { line: line.trim(), excerpt: rest.replace(/^> ?/gm, "").trim() };
}

/** Whether each sentence of `text` (cut at any … the reply added) is in the book, word for word. */
function inBook(text: string, book: string): boolean {
  const pieces = flat(text)
    .split(/…|(?<=[.!?])\s+/)
    .map((p) => p.trim())
    // A comma the reply turned into a full stop where it cut a line at its dialogue tag is a cut too.
    .map((p) => p.replace(/[.,;:]+$/, ""))
    .filter((p) => words(p).length >= 2);
  return pieces.every((p) => book.includes(p));
}

export function judge(questions: readonly Question[], replies: readonly string[], bookText: string): Judged[] {
  const book = flat(bookText).replace(/["“”]/g, "|");
  const bookPlain = book.replaceAll("|", " ").replace(/\s+/g, " ");
  return replies.map((reply, i) => {
    const { line, excerpt } = partsOf(reply);
    const lineWords = ` ${words(line).join(" ")}`;
    const q = questions[i]!;
    const earlier = replies.slice(Math.max(0, i - RECENT_REPLIES), i).map((r) => partsOf(r).line);
    return {
      ask: q.ask,
      line,
      excerpt,
      relevant: q.keys.some((k) => lineWords.includes(` ${words(k).join(" ")}`)),
      fromBook: [line, excerpt].every((t) => t === "" || inBook(t.replace(/["“”]/g, " "), bookPlain)),
      whole: [line, excerpt].every((t) => t === "" || SENTENCE_END.test(t)) && !SEAM.test(reply),
      fresh: line === "" || !earlier.includes(line),
    };
  });
}

export const passes = (j: Judged) => j.relevant && j.fromBook && j.whole && j.fresh;

let dataDir: string;
let deps: Deps;
let chat: ReturnType<typeof createApp>;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "offline-replies-"));
  deps = await buildDeps(loadConfig({ DATA_DIR: dataDir }), { logger: silentLogger });
  chat = createApp({ ...deps, probeBook: async (url) => ({ url, bytes: 0, contentType: "text/plain" }) });
});
afterAll(async () => {
  await chat?.settle();
  await deps?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function converse(session: LocalChat, questions: readonly Question[]): Promise<string[]> {
  const replies: string[] = [];
  for (const { ask } of questions) {
    const body: ChatRequest = { ...session, user_message: ask };
    const { user_id, character_id, book_id, session_id, user_message } = body;
    const response = await chat.fetch(
      new Request("http://localhost/character/chat", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ user_id, character_id, book_id, session_id, user_message }),
      }),
    );
    const done = (await readSse(response)).events.at(-1)!;
    if (!("done" in done)) throw new Error(`no reply to "${ask}": ${JSON.stringify(done)}`);
    replies.push(done.full_response);
    await chat.settle();
  }
  return replies;
}

function table(title: string, judged: readonly Judged[]): string {
  const mark = (ok: boolean) => (ok ? "yes" : "**no**");
  const rows = judged.map(
    (j, i) =>
      `| ${i + 1} | ${j.ask} | ${flat(j.line).slice(0, 90).replaceAll("|", "\\|")}${j.line.length > 90 ? "…" : ""} | ${mark(j.relevant)} | ${mark(j.fromBook)} | ${mark(j.whole)} | ${mark(j.fresh)} |`,
  );
  return [
    `${title}: ${judged.filter(passes).length}/${judged.length} pass`,
    "| # | Question | Line said | Relevant | From the book | Whole | Fresh |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

describe("offline replies, judged by the stated rule", () => {
  test(`"${SAMPLE_BOOK.title}", ${MENDING_ROOM.length} questions to Ottilie`, async () => {
    expect((await seedSampleBook(deps)).status).toBe("ingested");
    const session = await openLocalChat(deps.db, { book: SAMPLE_BOOK.id, character: "Ottilie" });
    const judged = judge(MENDING_ROOM, await converse(session, MENDING_ROOM), await readFile(SAMPLE_BOOK.path, "utf8"));
    console.log(table(SAMPLE_BOOK.title, judged));
    // Relevance is the part that can miss; the rest holds for every reply.
    expect(judged.filter((j) => !(j.fromBook && j.whole && j.fresh)).map((j) => j.ask)).toEqual([]);
    expect(judged.filter(passes).length).toBeGreaterThanOrEqual(MIN_PASSING.mendingRoom);
  });

  test.skipIf(!existsSync(ALICE_PATH))(`Alice's Adventures in Wonderland, ${ALICE.length} questions to Alice`, async () => {
    const book = await insertBook(deps.db, { title: "Alice's Adventures in Wonderland", author: "Lewis Carroll", filePath: ALICE_PATH });
    await runPipeline(deps, { bookId: book.id, source: { path: ALICE_PATH } });
    const session = await openLocalChat(deps.db, { book: book.id, character: "Alice" });
    const judged = judge(ALICE, await converse(session, ALICE), await readFile(ALICE_PATH, "utf8"));
    console.log(table("Alice's Adventures in Wonderland", judged));
    // Relevance is the part that can miss; the rest holds for every reply.
    expect(judged.filter((j) => !(j.fromBook && j.whole && j.fresh)).map((j) => j.ask)).toEqual([]);
    expect(judged.filter(passes).length).toBeGreaterThanOrEqual(MIN_PASSING.alice);
  });
});

/** Measured 16/22 and 10/22 (README, Offline replies; 14 and 0 before); below these, replies got worse. Book NLP changes may move a line or two. */
const MIN_PASSING = { mendingRoom: 14, alice: 8 };
