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
import { listCharacters } from "../../common/db/characters.ts";
import { decodeBookBytes } from "../../common/text-decoding.ts";
import { parseBookNlp } from "../../ingest/nlp/booknlp-files.ts";
import { toCharacterList, withoutTitle } from "../../ingest/nlp/character-list.ts";
import { analyze, render } from "../../ingest/nlp/engine.ts";
import { selectCharacters } from "../../ingest/characters/character-selection.ts";
import { spread } from "../../ingest/characters/character-lines.ts";
import { sayable, sayLine } from "../../common/llm/offline-conversation.ts";
import { withoutMarkup } from "../../common/llm/offline-text.ts";
import { SAMPLE_BOOK, seedSampleBook } from "../../ingest/sample-book.ts";
import { readSse } from "../support/chat.ts";
import type { LanguageModel } from "../../common/llm/index.ts";
import { OWN_LINES_HEADING, READING_POSITION_HEADING } from "../../common/llm/prompt-format.ts";
import { extractWork } from "../../ingest/book/book-text.ts";
import { createTextLocator } from "../../ingest/characters/checkpoints.ts";

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
 *  4. fresh: the line was not said in any of the session's previous five replies;
 *  5. the character's own: every sentence of the line lies inside a quotation of the book that the
 *     NLP engine attributes to the asked character AND that no dialogue tag next to it in the book
 *     gives to someone else ("…,” said Mrs. Bennet; “said her mother”; a he/she of the other sex).
 *     The engine chose the lines, so its attribution alone would be circular: the tag check reads
 *     the book's own words around the quotation, independently of the engine's guess;
 *  6. no fragment: the line and the excerpt start where a sentence (or a quotation) starts in the
 *     book and the line holds no dialogue tag ("…, said she, …");
 *  7. no markup: no `_emphasis_` underscores and no "> " block-quote markers.
 * docs/decisions.md's table ("Offline replies") is this test's output.
 */

// Ingests three Gutenberg books on the embedded stores and chats 70-odd turns.
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

const ELIZABETH: Question[] = [
  { ask: "What do you think of Mr. Darcy?", keys: ["darcy", "proud", "pride", "disagreeable", "dislike", "hate"] },
  { ask: "Why did you refuse Mr. Collins?", keys: ["collins", "refus", "marry", "offer", "happy", "proposal"] },
  { ask: "How did you first meet Mr. Wickham?", keys: ["wickham", "meryton", "officer", "militia"] },
  { ask: "What did you think of Darcy's letter?", keys: ["letter", "read", "blind", "ashamed", "wickham", "darcy"] },
  { ask: "What do you think of Lady Catherine?", keys: ["catherine", "ladyship", "rosings", "impertinen"] },
  { ask: "Is your sister Jane in love with Mr. Bingley?", keys: ["jane", "sister", "bingley", "love", "affection"] },
  { ask: "What did you think when you saw Pemberley?", keys: ["pemberley", "house", "grounds", "derbyshire", "mistress"] },
  { ask: "Why did Lydia run away with Wickham?", keys: ["lydia", "wickham", "elope", "married", "marry"] },
];

const DARCY: Question[] = [
  { ask: "Why did you separate Bingley from Jane?", keys: ["bingley", "jane", "sister", "friend", "attachment", "indifferen"] },
  { ask: "What did you think of Elizabeth at first?", keys: ["elizabeth", "tolerable", "handsome", "eyes", "pretty", "bennet"] },
  { ask: "Why did you propose to Elizabeth?", keys: ["love", "ardent", "admire", "marry", "feelings", "hand", "elizabeth"] },
  { ask: "What did Mr. Wickham do to you?", keys: ["wickham", "father", "living", "georgiana", "sister"] },
  { ask: "Do you enjoy dancing?", keys: ["danc", "ball", "partner"] },
  { ask: "What do you think of Elizabeth's family?", keys: ["family", "mother", "sister", "connection", "relations"] },
  { ask: "Is pride a fault?", keys: ["pride", "proud", "vanity", "fault", "temper"] },
  { ask: "How is your sister Georgiana?", keys: ["georgiana", "sister"] },
];

const HOLMES: Question[] = [
  { ask: "How did you know I had been in Afghanistan?", keys: ["afghanistan", "observ", "deduc", "see", "tanned", "military"] },
  { ask: "What do you make of Irene Adler?", keys: ["woman", "adler", "irene", "photograph", "king"] },
  { ask: "What was the Red-Headed League?", keys: ["league", "red", "headed", "wilson", "vacancy"] },
  { ask: "What is your method?", keys: ["method", "observ", "trifle", "little things", "data", "reason", "deduc"] },
  { ask: "What was the speckled band?", keys: ["band", "speckled", "snake", "adder", "swamp"] },
  { ask: "Why do you smoke a pipe when you think?", keys: ["pipe", "smoke", "problem", "tobacco"] },
  { ask: "Who stole the beryl coronet?", keys: ["coronet", "beryl", "arthur", "holder", "stones", "burnwell"] },
  { ask: "What do you think of Scotland Yard?", keys: ["lestrade", "yard", "police", "official", "gregson", "jones"] },
];

const BOOKS_DIR = join(import.meta.dir, "..", "..", "..", "shared", "books");
const PRIDE_PATH = join(BOOKS_DIR, "pg1342_pride_and_prejudice.txt");
const SHERLOCK_PATH = join(BOOKS_DIR, "pg1661_adventures_of_sherlock_holmes.txt");
const ALICE_PATH = join(import.meta.dir, "..", "..", "..", "shared", "books", "pg11_alices_adventures_in_wonderland.txt");

const SEAM = /\w (?:n['’]t|['’](?:s|t|d|ll|re|ve|m))\b|\w [,.;:!?](?:\s|$)/;
const SENTENCE_END = /[.!?…]["”’)]*$/;
const RECENT_REPLIES = 5;
/** Verbs of a dialogue tag, as the judge reads the book around a quotation. */
const SPEECH_VERB = "(?:said|says|cried|replied|answered|asked|added|continued|returned|observed|remarked|exclaimed|whispered|resumed|rejoined)";
/** A dialogue tag inside a line: "…, said she, …" (a nested ‘…,’ said he is the character quoting someone and does not count). */
const TAG_IN_LINE = new RegExp(`[,!?—]\\s+${SPEECH_VERB}\\s+(?:he|she|I|[A-Z])`);
const MARKUP = /(?:^|[\s(“"‘])_|_(?:[\s.,;:!?)”"’]|$)|^> /m;
const OPENING = /[“"‘]/;

export interface Judged {
  ask: string;
  line: string;
  excerpt: string;
  relevant: boolean;
  fromBook: boolean;
  whole: boolean;
  fresh: boolean;
  own: boolean;
  unbroken: boolean;
  plain: boolean;
  /** The sentences that broke a rule, for the failure message. */
  why: string[];
}

const flat = (text: string) => text.replace(/\s+/g, " ").trim();
const words = (text: string) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
const sentencesOf = (text: string) =>
  flat(text)
    .split(/(?<!\b(?:Mr|Mrs|Ms|Dr|St)\.)(?<=[.!?…]["”’)]*)\s+/)
    .map((p) => p.replace(/^[…\s]+|[…\s]+$/g, ""))
    .filter((p) => words(p).length >= 2);

/** The character's line and the cited excerpt of a reply. */
function partsOf(reply: string): { line: string; excerpt: string } {
  const [line = "", rest = ""] = reply.split(/\n\n(?:As the book tells it|The book tells it this way):\n/);
  return { line: line.trim(), excerpt: rest.replace(/^> ?/gm, "").trim() };
}

/**
 * Where `text` occurs in the book as printed: any run of whitespace and any quotation mark match,
 * the book's `_emphasis_` marks are read through, and where the text goes on from one quotation to
 * the next, the dialogue tag between them ("…,” said she, “…") may stand between two words.
 */
function occurrences(text: string, book: string): { at: number; end: number }[] {
  const gap = "(?:\\s+|[”\"’]\\s*[^“”\"]{1,240}?\\s*[“\"‘]|\\s*[“\"‘])";
  // Quotation marks at the edges may be the reply's own, opening or closing a quotation it cut.
  const bare = flat(text).replace(/^["“”‘’]+|["“”‘’]+$/g, "").replace(/[.,;:]+$/, "");
  const pattern = Array.from(bare, (ch) =>
    ch === " " ? `_?${gap}_?` : /["“”]/.test(ch) ? "[\"“”]" : /['‘’]/.test(ch) ? "['‘’]" : `${ch.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}_?`,
  ).join("");
  // The pattern is tried only around each occurrence of the text's longest word: scanning a long book
  // (War and Peace) with it from every position backtracks through the gaps for minutes.
  const anchor = (bare.match(/\p{L}+/gu) ?? []).reduce((a, b) => (b.length > a.length ? b : a), "");
  if (!anchor) return Array.from(book.matchAll(new RegExp(pattern, "g")), (m) => ({ at: m.index, end: m.index + m[0].length }));
  const span = 4 * bare.length + 600;
  const found = new Map<number, number>();
  for (let hit = book.indexOf(anchor); hit >= 0; hit = book.indexOf(anchor, hit + 1)) {
    const from = Math.max(0, hit - span);
    for (const m of book.slice(from, hit + span).matchAll(new RegExp(pattern, "g"))) found.set(from + m.index, from + m.index + m[0].length);
  }
  return [...found].sort((a, b) => a[0] - b[0]).map(([at, end]) => ({ at, end }));
}

/** Rule 2: every sentence of `text` is in the book, word for word (a comma the reply turned into a full stop aside). */
function inBook(text: string, book: string): boolean {
  return sentencesOf(text).every((s) => occurrences(s, book).length > 0);
}

/**
 * Rule 6's end: each sentence ends where the book ends one: at a full stop, or at the comma before a
 * dialogue tag that itself ends the sentence (“Friday is too soon,” said Ottilie. “Glue…”), not at
 * one the quotation goes on after (“What does Mr. Darcy mean,” said she to Charlotte, “by listening…”).
 */
function endsWhole(text: string, book: string): boolean {
  return sentencesOf(text).every((s) => {
    const bare = s.replace(/[.,;:]+$/, "");
    if (/[.!?]["”’)]*$/.test(bare)) return true;
    return occurrences(bare, book).some(({ end }) => /^_?(?:[.!?]|,["”’]\s+[^“”"]{1,240}?[.!?](?=\s|$))/.test(book.slice(end, end + 260)));
  });
}

/** A quotation of the book: its marks' offsets and the speaker the NLP engine gives it. */
interface Quotation {
  open: number;
  close: number;
  speaker: string[];
}

/** What the judge knows about the book: its text, the engine's quotations, the paragraph breaks. */
export interface BookFacts {
  text: string;
  quotations: Quotation[];
}

/** The book's quotations with the names of the speaker the native NLP engine attributes each to. */
function bookFacts(text: string, analysis = analyze(text)): BookFacts {
  // The engine's token arrays stand in for its .tokens file, which is slow to render and parse back.
  const { entities, quotes, book } = render(analysis);
  const parsed = parseBookNlp({ entities, quotes, book });
  const names = new Map(
    toCharacterList(parsed, { minMentions: 1, minQuotes: 0, maxCharacters: 100_000 }).map((c) => [c.id, [c.name, ...c.aliases]]),
  );
  const { start, end } = analysis.tok;
  const quotations = parsed.quotes.map((q) => ({
    open: start[q.quoteStart]!,
    close: end[q.quoteEnd]!,
    speaker: q.charId === null ? [] : (names.get(q.charId) ?? []),
  }));
  return { text, quotations };
}

/** Who the line is asked of: their names and the pronoun a tag would use for them. */
export interface Speaker {
  names: string[];
  pronoun: "he" | "she";
}

const nameWords = (names: readonly string[]) => new Set(names.flatMap((n) => words(withoutTitle(n))));
const TITLE = "(?:Mr\\.|Mrs\\.|Miss|Lady|Sir|Colonel|Captain|Dr\\.|Lord|Prince|Princess|Count|Countess|General|Madame|Monsieur|Baron|Baroness)\\s+";
/** A capitalised name, accents and all ("Natásha"). */
const NAME = "\\p{Lu}\\p{L}+";
const TAG_AFTER = new RegExp(`^[\\s,!?.—]*${SPEECH_VERB}\\s+(?:${TITLE})?(he|she|(?:her|his|the)\\s+\\p{L}+|${NAME})|^[\\s,!?.—]*(?:${TITLE})?(${NAME}|he|she)\\s+${SPEECH_VERB}\\b`, "u");
const TAG_ANYWHERE = new RegExp(`${SPEECH_VERB}\\s+(?:${TITLE})?(he|she|(?:her|his|the)\\s+\\p{L}+|${NAME})|\\b(?:${TITLE})?(${NAME}|he|she)\\s+${SPEECH_VERB}\\b`, "u");
const TAG_BEFORE = new RegExp(`${SPEECH_VERB}\\s+(?:${TITLE})?(he|she|(?:her|his|the)\\s+\\p{L}+|${NAME})[,:.]?\\s*$|(?:${TITLE})?(${NAME}|he|she)\\s+${SPEECH_VERB}[,:.]?\\s*$`, "u");

const withoutArticle = (name: string) => name.toLowerCase().replace(/^(?:the|a|an)\s+/, "");

/** Whether a tag's speaker ("Mrs. Bennet", "she", "her mother") can be the asked character. */
function tagFits(who: string | undefined, speaker: Speaker): boolean {
  if (who === undefined) return true;
  if (/^(?:he|she)$/i.test(who)) return who.toLowerCase() === speaker.pronoun;
  // "her mother", "the other": somebody described, not the speaker by name, unless the book calls them so ("said the King").
  if (/\s/.test(who)) return speaker.names.some((n) => withoutArticle(n) === withoutArticle(who));
  return nameWords(speaker.names).has(who.toLowerCase());
}

/**
 * Rule 5 for one sentence of a line: some occurrence of it lies inside a quotation that the engine
 * attributes to the speaker, with no dialogue tag naming anyone else right after its closing, right
 * before its opening, or between it and the paragraph's quotation before it.
 */
function ownSentence(sentence: string, facts: BookFacts, speaker: Speaker): boolean {
  const wanted = nameWords(speaker.names);
  return occurrences(sentence, facts.text).some(({ at }) => {
    const q = facts.quotations.find((x) => x.open <= at && at < x.close);
    if (!q || !q.speaker.some((n) => words(withoutTitle(n)).some((w) => wanted.has(w)))) return false;
    // `close` is the offset just past the closing mark: from one further, a paragraph break would lose its first newline.
    const after = facts.text.slice(q.close, q.close + 80).split(/\n\s*\n/)[0]!;
    const before = facts.text.slice(Math.max(0, q.open - 400), q.open).split(/\n\s*\n/).at(-1)!;
    const tagAfter = TAG_AFTER.exec(after);
    // Between two quotations of a paragraph, the tag of the first ("cried her father as she appeared.") is the second's too.
    const sincePrevious = /(?:[”"]|’(?!\p{L}))((?:[^”"’]|’(?=\p{L}))*)$/u.exec(before);
    const tagBefore = sincePrevious ? TAG_ANYWHERE.exec(sincePrevious[1]!) : TAG_BEFORE.exec(before);
    return tagFits(tagAfter?.[1] ?? tagAfter?.[2], speaker) && tagFits(tagBefore?.[1] ?? tagBefore?.[2], speaker);
  });
}

/** Rule 6's start: `text` begins where a sentence or a quotation begins in the book (some occurrence of its first words). */
function startsWhole(text: string, book: string): boolean {
  const head = text.replace(/^[“"‘\s]+/, "");
  if (head.startsWith("…") || /^\p{Ll}/u.test(head)) return false;
  const first = (sentencesOf(head)[0] ?? head).split(/\s+/).slice(0, 6).join(" ");
  return occurrences(first, book).some(({ at }) => {
    const before = book.slice(Math.max(0, at - 40), at);
    if (/\n\s*\n\s*$/.test(before) || at === 0) return true;
    const trimmed = before.replace(/[\s_]+$/, "");
    if (OPENING.test(trimmed.at(-1) ?? "")) return true;
    return /[.!?:]["”’)]*$/.test(trimmed);
  });
}

export function judge(
  questions: readonly Question[],
  replies: readonly string[],
  facts: BookFacts,
  speaker: Speaker,
): Judged[] {
  return replies.map((reply, i) => {
    const { line, excerpt } = partsOf(reply);
    const lineWords = ` ${words(line).join(" ")}`;
    const q = questions[i]!;
    const earlier = replies.slice(Math.max(0, i - RECENT_REPLIES), i).map((r) => partsOf(r).line);
    const parts = [line, excerpt].filter(Boolean);
    const why = [
      ...parts.flatMap((t) => sentencesOf(t).filter((s) => !inBook(s, facts.text)).map((s) => `not in the book: ${s}`)),
      ...sentencesOf(line).filter((s) => !ownSentence(s, facts, speaker)).map((s) => `not the character's: ${s}`),
      ...parts.filter((t) => !startsWhole(t, facts.text)).map((t) => `starts mid-sentence: ${t.slice(0, 60)}`),
      ...parts.flatMap((t) => sentencesOf(t).filter((s) => !endsWhole(s, facts.text)).map((s) => `ends mid-sentence: ${s}`)),
    ];
    return {
      why,
      ask: q.ask,
      line,
      excerpt,
      relevant: q.keys.some((k) => lineWords.includes(` ${words(k).join(" ")}`)),
      fromBook: [line, excerpt].every((t) => t === "" || inBook(t, facts.text)),
      whole: [line, excerpt].every((t) => t === "" || SENTENCE_END.test(t)) && !SEAM.test(reply),
      fresh: line === "" || !earlier.includes(line),
      own: sentencesOf(line).every((s) => ownSentence(s, facts, speaker)),
      unbroken:
        [line, excerpt].every((t) => t === "" || (startsWhole(t, facts.text) && endsWhole(t, facts.text))) &&
        !TAG_IN_LINE.test(line) &&
        // An ellipsis the reply added marks a cut; these books print none of their own.
        !/…/.test(line + excerpt),
      plain: !MARKUP.test(reply),
    };
  });
}

export const passes = (j: Judged) => j.relevant && j.fromBook && j.whole && j.fresh && j.own && j.unbroken && j.plain;

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
      `| ${i + 1} | ${j.ask} | ${flat(j.line).slice(0, 90).replaceAll("|", "\\|")}${j.line.length > 90 ? "…" : ""} | ${[
        j.relevant,
        j.fromBook,
        j.whole,
        j.fresh,
        j.own,
        j.unbroken,
        j.plain,
      ]
        .map(mark)
        .join(" | ")} |`,
  );
  return [
    `${title}: ${judged.filter(passes).length}/${judged.length} pass`,
    "| # | Question | Line said | Relevant | From the book | Whole | Fresh | Own line | No fragment | No markup |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

/** The book as the pipeline reads it (Sherlock Holmes is Windows-1252). */
async function bookText(path: string): Promise<string> {
  const decoded = decodeBookBytes(new Uint8Array(await readFile(path)));
  if (!decoded.ok) throw new Error(`${path}: ${decoded.reason}`);
  return decoded.text;
}

const ingested = new Map<string, string>();

/** Ingests the Gutenberg file once (as downloaded) and returns its book id. */
async function ingest(path: string, title: string, author: string): Promise<string> {
  const known = ingested.get(path);
  if (known) return known;
  const book = await insertBook(deps.db, { title, author, filePath: path });
  await runPipeline(deps, { bookId: book.id, source: { path } });
  ingested.set(path, book.id);
  return book.id;
}

/** Chats the questions to the character and judges every reply. */
async function judgedSession(bookId: string, character: string, pronoun: Speaker["pronoun"], questions: readonly Question[], text: string) {
  const session = await openLocalChat(deps.db, { book: bookId, character });
  const own = (await listCharacters(deps.db, bookId)).find((c) => c.id === session.character_id)!;
  return judge(questions, await converse(session, questions), bookFacts(text), { names: [own.name, ...own.aliases], pronoun });
}

/** Every rule but relevance holds for every reply; relevance is the part that can miss. */
function expectSound(judged: readonly Judged[]): void {
  const unsound = judged.filter((j) => !(j.fromBook && j.whole && j.fresh && j.own && j.unbroken && j.plain));
  expect(unsound.map((j) => `${j.ask} → ${j.line} | ${j.excerpt} | ${j.why.join(" | ")}`)).toEqual([]);
}

const skipWithout = (path: string) => {
  if (existsSync(path)) return false;
  console.log(`skipped: ${path} is not there (the Gutenberg books live in ../shared/books)`);
  return true;
};

/** The model, with every chat turn's system message written down as it goes by. */
function recordingChat(llm: LanguageModel, systems: string[]): LanguageModel {
  return {
    provider: llm.provider,
    complete: (messages, options) => llm.complete(messages, options),
    stream: (messages, options) => {
      if (options.purpose === "chat") systems.push(messages[0]?.content ?? "");
      return llm.stream(messages, options);
    },
    embed: (texts, options) => llm.embed(texts, options),
  };
}

describe("offline replies, judged by the stated rule", () => {
  test(`"${SAMPLE_BOOK.title}", ${MENDING_ROOM.length} questions to Ottilie`, async () => {
    expect((await seedSampleBook(deps)).status).toBe("ingested");
    const judged = await judgedSession(SAMPLE_BOOK.id, "Ottilie", "she", MENDING_ROOM, await readFile(SAMPLE_BOOK.path, "utf8"));
    console.log(table(SAMPLE_BOOK.title, judged));
    expectSound(judged);
    expect(judged.filter(passes).length).toBeGreaterThanOrEqual(MIN_PASSING.mendingRoom);
  });

  test.skipIf(skipWithout(ALICE_PATH))(`Alice's Adventures in Wonderland, ${ALICE.length} questions to Alice`, async () => {
    const id = await ingest(ALICE_PATH, "Alice's Adventures in Wonderland", "Lewis Carroll");
    const judged = await judgedSession(id, "Alice", "she", ALICE, await bookText(ALICE_PATH));
    console.log(table("Alice's Adventures in Wonderland", judged));
    expectSound(judged);
    expect(judged.filter(passes).length).toBeGreaterThanOrEqual(MIN_PASSING.alice);
  });

  describe.skipIf(skipWithout(PRIDE_PATH) || skipWithout(SHERLOCK_PATH))("the issue's 24 questions to Elizabeth, Darcy and Holmes", () => {
    const all: Judged[] = [];
    const sessions = [
      { path: PRIDE_PATH, title: "Pride and Prejudice", author: "Jane Austen", character: "Elizabeth", pronoun: "she", questions: ELIZABETH },
      { path: PRIDE_PATH, title: "Pride and Prejudice", author: "Jane Austen", character: "Darcy", pronoun: "he", questions: DARCY },
      { path: SHERLOCK_PATH, title: "The Adventures of Sherlock Holmes", author: "Arthur Conan Doyle", character: "Holmes", pronoun: "he", questions: HOLMES },
    ] as const;
    for (const s of sessions) {
      test(`${s.title}, ${s.questions.length} questions to ${s.character}`, async () => {
        const id = await ingest(s.path, s.title, s.author);
        const judged = await judgedSession(id, s.character, s.pronoun, s.questions, await bookText(s.path));
        console.log(table(`${s.title}, ${s.character}`, judged));
        all.push(...judged);
        expectSound(judged);
      });
    }
    test(`at least ${MIN_PASSING.issue} of the 24 replies pass`, () => {
      expect(all).toHaveLength(24);
      expect(all.filter(passes).length).toBeGreaterThanOrEqual(MIN_PASSING.issue);
    });
  });
});

/** Lines judged per character, spread across the book: the judge reads the whole book for each sentence. */
const LINES_JUDGED = 30;

describe("the lines the leading characters of the books can say", () => {
  const books = [
    ["Alice's Adventures in Wonderland", ALICE_PATH],
    ["Pride and Prejudice", PRIDE_PATH],
    ["The Adventures of Sherlock Holmes", SHERLOCK_PATH],
    ["War and Peace", join(BOOKS_DIR, "pg2600_war_and_peace.txt")],
  ] as const;
  test.each(books)("%s: 30 lines of each of the three leading characters, across the book, are from it, whole and their own", async (_, path) => {
    if (skipWithout(path)) return;
    const work = extractWork(await bookText(path)).text;
    const analysis = analyze(work);
    const { entities, quotes, book } = render(analysis);
    const { tok } = analysis;
    const tokens = { paragraph: tok.paragraph, word: tok.text, start: tok.start, end: tok.end, offsets: "utf16" as const };
    const leads = selectCharacters(parseBookNlp({ entities, quotes, book }), {}, { text: work, tokens }).slice(0, 3);
    const facts = bookFacts(work, analysis);
    const unsound = leads.flatMap((c) => {
      // As a reply says them: whole ones only, without the book's emphasis marks, a comma before a tag a full stop.
      const lines = spread((c.lines ?? []).filter(sayable), LINES_JUDGED).map((l) => sayLine(withoutMarkup(l)));
      const questions = lines.map(() => ({ ask: "", keys: [] }));
      const speaker: Speaker = { names: [c.name, ...c.aliases], pronoun: c.gender === "female" ? "she" : "he" };
      return judge(questions, lines, facts, speaker)
        .filter((j) => !(j.fromBook && j.whole && j.own && j.unbroken && j.plain))
        .map((j) => `${c.name}: ${j.line} | ${j.why.join(" | ")}`);
    });
    expect(leads.length).toBe(3);
    expect(unsound).toEqual([]);
  });
});

// After the judged sessions: the sample book is seeded only into a database without books.
describe.skipIf(skipWithout(PRIDE_PATH))("a reader part-way through Pride and Prejudice", () => {
  test.each([0.3, 0.6, 0.9])("at %p Elizabeth's persona carries her lines from just before the page and none after it, and she answers with a line from before it", async (position) => {
    const id = await ingest(PRIDE_PATH, "Pride and Prejudice", "Jane Austen");
    const work = extractWork(await bookText(PRIDE_PATH)).text;
    const systems: string[] = [];
    const app = createApp({ ...deps, llm: recordingChat(deps.llm, systems), probeBook: async (url) => ({ url, bytes: 0, contentType: "text/plain" }) });
    const session = await openLocalChat(deps.db, { book: id, character: "Elizabeth" });
    const { user_id, character_id, book_id, session_id } = session;
    const response = await app.fetch(
      new Request("http://localhost/character/chat", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ user_id, character_id, book_id, session_id, user_message: "What do you think of Mr. Darcy?", reading_position: position }),
      }),
    );
    const done = (await readSse(response)).events.at(-1)!;
    await app.settle();
    if (!("done" in done)) throw new Error(JSON.stringify(done));
    const system = systems.at(-1)!;
    const section = system.slice(system.indexOf(OWN_LINES_HEADING), system.indexOf(READING_POSITION_HEADING));
    const lines = [...section.matchAll(/^"(.+)"$/gm)].map((m) => m[1]!);
    expect(lines.length).toBeGreaterThan(0);
    // Found in the book as ingestion finds them: whatever the whitespace, across a dialogue tag.
    const locate = createTextLocator(work);
    const ends = lines.map((l) => locate(l)?.end ?? -1);
    expect(ends.filter((end) => end < 0 || end > position * work.length)).toEqual([]);
    // The latest of them within the tenth of the book before the page: the scenes just read.
    expect(Math.max(...ends) / work.length).toBeGreaterThan(position - 0.1);
    // Her answer is a line of hers from before the page too.
    const said = partsOf(done.full_response).line;
    // Its first sentence, without the full stop the reply may have put for the comma before a dialogue tag.
    const saidEnd = locate(said.split(/(?<=[.!?])\s/)[0]!.replace(/[.,!?]$/, ""))?.end ?? -1;
    expect(saidEnd > 0 && saidEnd <= position * work.length).toBe(true);
  });
});

/** Measured 17/22, 14/22 and 20/24 (docs/decisions.md, Offline replies); 20/24 is the goal set for the issue's questions, the others allow a line moved by the book NLP. */
const MIN_PASSING = { mendingRoom: 16, alice: 13, issue: 20 };
