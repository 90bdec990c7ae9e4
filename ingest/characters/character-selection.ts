/**
 * From what the NLP step found to the characters the pipeline writes profiles for: ranking, merging
 * duplicates, and the context each profile call gets (who the character is seen with, passages, a
 * spread of quotes, chosen in character-lines.ts). LLM discovery's answers are merged in
 * discovered-characters.ts, each character's color, emoji and description are in character-style.ts.
 * Pure: no I/O.
 */
import { MAX_HEADING_WORDS, storyBoundaries } from "../book/story-boundaries.ts";
import { detokenize, type ParsedBookNlp } from "../nlp/booknlp-files.ts";
import { DEFAULT_MIN_MENTIONS, givenNamesOf, QUOTE_WEIGHT, surnamesOf, toCharacterList, withoutTitle, type CharacterSummary } from "../nlp/character-list.ts";
import { nameKey } from "./character-names.ts";
import { knownLines, quoteSample, spread, taggedLines } from "./character-lines.ts";
import { tokenColumns, type TokenColumns } from "../nlp/token-columns.ts";

/**
 * The cap on the characters a book keeps (each gets a profile and a persona); a collection's cast
 * may raise it, up to MAX_COLLECTION_CHARACTERS. The NLP engine's own list before selection has a
 * bound of its own, DEFAULT_MAX_CANDIDATES (nlp/character-list.ts).
 */
export const DEFAULT_CHARACTER_CAP = 12;
/** Leading characters kept from each story of a collection, ahead of the cap. */
export const STORY_LEADS = 2;
/** Lines in each of two stories that make a character one of the collection's recurring cast. */
export const RECURRING_MIN_QUOTES = 2;
/** DEFAULT_CHARACTER_CAP grows to hold a collection's recurring cast and story leads, up to this many. */
export const MAX_COLLECTION_CHARACTERS = 40;
/** A character who never speaks gives a persona nothing to imitate. */
export const DEFAULT_MIN_QUOTES = 1;
export const MAX_PASSAGES = 4;
/** Tokens of context on each side of a mention in a passage. */
export const PASSAGE_CONTEXT_TOKENS = 60;
export const MAX_DISCOVERY_PASSAGE_CHARS = 600;
export const MAX_COOCCURRING = 8;

export interface SelectionOptions {
  maxCharacters?: number;
  minMentions?: number;
  minQuotes?: number;
}

/** One character, with everything the two LLM passes need. */
export interface FoundCharacter {
  name: string;
  aliases: string[];
  gender: string | null;
  /** A spread of the character's lines across the book, at most MAX_PROFILE_QUOTES. */
  quotes: string[];
  /**
   * Every line the book confidently gives them, in book order, at most MAX_KNOWN_LINES: what a chat
   * turn may quote of them up to a reader's position. Absent: the quotes (LLM discovery's characters).
   */
  lines?: string[];
  mentionCount: number;
  quoteCount: number;
  importance: number;
  /** Other selected characters seen in the same paragraphs (or samples), most often first. */
  cooccurring: { name: string; count: number }[];
  passages: string[];
}

interface Merged {
  summary: CharacterSummary;
  /** BookNLP cluster ids: coreference sometimes splits one person into several. */
  ids: number[];
  quotes: string[];
}

/**
 * Clusters that end up with the same name are one character to a reader (and one row in the
 * database), unless their fuller names show different surnames or different given names: "Mary" of
 * Mary Sutherland and "Mary" of Mary Holder are two women who share a given name, "Kutúzov" of Paul
 * Ivánovich and of Michael Ilariónovich Kutúzov two men who share a surname, and each is then called
 * by their fullest name.
 */
function mergeByName(list: readonly CharacterSummary[]): Merged[] {
  const byKey = new Map<string, Merged[]>();
  const all: Merged[] = [];
  for (const c of list) {
    const key = nameKey(c.name);
    const same = byKey.get(key) ?? [];
    const names = [c.name, ...c.aliases];
    const existing = same.find((m) => {
      const theirs = [m.summary.name, ...m.summary.aliases];
      return !disjoint(surnamesOf(names), surnamesOf(theirs)) && !disjoint(givenNamesOf(names), givenNamesOf(theirs));
    });
    if (!existing) {
      const merged = { summary: { ...c, aliases: [...c.aliases] }, ids: [c.id], quotes: [...c.quotes] };
      byKey.set(key, [...same, merged]);
      all.push(merged);
      continue;
    }
    const s = existing.summary;
    s.mentionCount += c.mentionCount;
    s.quoteCount += c.quoteCount;
    if (s.gender === "unknown") s.gender = c.gender;
    const seen = new Set([nameKey(s.name), ...s.aliases.map(nameKey)]);
    for (const a of c.aliases) if (!seen.has(nameKey(a))) s.aliases.push(a);
    existing.ids.push(c.id);
    existing.quotes.push(...c.quotes);
  }
  for (const same of byKey.values()) if (same.length > 1) for (const m of same) nameByFullestForm(m.summary);
  return all;
}

/** Both show names of the kind and none is shared: different surnames, or one surname and different given names (Paul and Michael Kutúzov). */
function disjoint(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size === 0 || b.size === 0) return false;
  for (const s of a) if (b.has(s)) return false;
  return true;
}

/**
 * The commonest alias of two words or more, without its title, becomes the name. The old name is
 * the one the people being told apart share ("Mary"), so it names none of them for sure and is
 * nobody's alias.
 */
function nameByFullestForm(s: CharacterSummary): void {
  const fuller = s.aliases.map(withoutTitle).find((a) => a.includes(" "));
  if (!fuller || nameKey(fuller) === nameKey(s.name)) return;
  s.aliases = s.aliases.filter((a) => nameKey(a) !== nameKey(fuller));
  s.name = fuller;
}

export const importanceOf = (mentions: number, quotes: number) => mentions + QUOTE_WEIGHT * quotes;

/** First and last token of every paragraph. */
function paragraphBounds(tokens: TokenColumns): Map<number, { start: number; end: number }> {
  const bounds = new Map<number, { start: number; end: number }>();
  for (let i = 0; i < tokens.paragraph.length; i++) {
    const p = tokens.paragraph[i]!;
    if (p < 0) continue;
    const b = bounds.get(p);
    if (!b) bounds.set(p, { start: i, end: i });
    else b.end = Math.max(b.end, i);
  }
  return bounds;
}

/**
 * The book's characters from BookNLP-format output: ranked by importance (mentions plus weighted
 * quotes), filtered by minimum mentions and quotes, clusters with one name merged, at most
 * maxCharacters, each with its quotes, co-occurring characters and passages. With the book's text,
 * passages are cut from it by the tokens' offsets; without it they are rebuilt from the tokens.
 * `tokens` defaults to the columns of parsed.tokens.
 */
/** Every character of the NLP output before any threshold: what selection starts from, and the people the spoiler guard knows beside the selected ones. */
export const characterList = (parsed: ParsedBookNlp): CharacterSummary[] =>
  toCharacterList(parsed, { minMentions: 0, minQuotes: 0, maxCharacters: Number.MAX_SAFE_INTEGER });

export function selectCharacters(
  parsed: ParsedBookNlp,
  options: SelectionOptions = {},
  book: { text?: string; tokens?: TokenColumns } = {},
  list: readonly CharacterSummary[] = characterList(parsed),
): FoundCharacter[] {
  const minQuotes = options.minQuotes ?? DEFAULT_MIN_QUOTES;
  const minMentions = options.minMentions ?? DEFAULT_MIN_MENTIONS;
  // Thresholds apply after merging: two halves of one person may only qualify together.
  const eligible = mergeByName(list)
    .filter((m) => m.summary.mentionCount >= minMentions && m.summary.quoteCount >= minQuotes)
    .sort((a, b) => importanceOf(b.summary.mentionCount, b.summary.quoteCount) - importanceOf(a.summary.mentionCount, a.summary.quoteCount));
  const tokens = book.tokens ?? tokenColumns(parsed);
  // In a collection of stories, each story's own leading characters are kept ahead of the cap
  // (see storyLeads); a novel is ranked by importance alone.
  const stories = storyBoundaries(paragraphOpenings(tokens));
  const kept = stories.length > 0 ? storyLeads(eligible, parsed, tokens, stories) : new Set<Merged>();
  const maxCharacters = options.maxCharacters ?? Math.min(Math.max(DEFAULT_CHARACTER_CAP, kept.size), MAX_COLLECTION_CHARACTERS);
  const chosen = [...eligible.filter((m) => kept.has(m)), ...eligible.filter((m) => !kept.has(m))]
    .slice(0, maxCharacters)
    .sort((a, b) => importanceOf(b.summary.mentionCount, b.summary.quoteCount) - importanceOf(a.summary.mentionCount, a.summary.quoteCount));

  const bounds = paragraphBounds(tokens);
  const paragraphOf = (token: number) => (token >= 0 && token < tokens.paragraph.length ? tokens.paragraph[token]! : -1);
  // Code-point offsets index a JavaScript string only when it has no astral characters.
  const text = book.text;
  const source = text !== undefined && (tokens.offsets === "utf16" || !/[\uD800-\uDBFF]/.test(text)) ? text : undefined;
  const names = new Map(list.map((c) => [c.id, [c.name, ...c.aliases]]));
  const lines = source === undefined ? undefined : taggedLines(parsed, tokens, source, names);
  const owner = new Map<number, number>();
  chosen.forEach((m, i) => m.ids.forEach((id) => owner.set(id, i)));
  const paragraphs = chosen.map(() => new Set<number>());
  const properMentions: { start: number; end: number }[][] = chosen.map(() => []);
  for (const e of parsed.entities) {
    const i = owner.get(e.coref);
    if (i === undefined || e.cat !== "PER") continue;
    const p = paragraphOf(e.start);
    if (p >= 0) paragraphs[i]!.add(p);
    if (e.prop === "PROP") properMentions[i]!.push({ start: e.start, end: e.end });
  }

  const passageAt = ({ start, end }: { start: number; end: number }): string => {
    const b = bounds.get(paragraphOf(start));
    if (!b) return "";
    const from = Math.max(b.start, start - PASSAGE_CONTEXT_TOKENS);
    const to = Math.min(b.end, end + PASSAGE_CONTEXT_TOKENS);
    const [onset, offset] = [tokens.start[from]!, tokens.end[to]!];
    if (source !== undefined && onset >= 0 && offset > onset) return source.slice(onset, offset).replace(/\s+/g, " ").trim();
    return detokenize(Array.from({ length: to - from + 1 }, (_, k) => tokens.word[from + k]!).join(" "));
  };

  return chosen.map((m, i) => {
    const cooccurring = chosen
      .map((other, j) => ({ name: other.summary.name, count: j === i ? 0 : countShared(paragraphs[i]!, paragraphs[j]!) }))
      .filter((c) => c.count > 0)
      .sort((a, b) => b.count - a.count)
      .slice(0, MAX_COOCCURRING);
    const mentions = properMentions[i]!.sort((a, b) => a.start - b.start);
    const passages = [...new Set(spread(mentions, MAX_PASSAGES).map(passageAt))].filter(Boolean);
    const s = m.summary;
    const own = lines ? m.ids.flatMap((id) => lines.get(id) ?? []) : m.quotes;
    return {
      name: s.name,
      aliases: s.aliases,
      gender: s.gender === "unknown" ? null : s.gender,
      quotes: quoteSample(own),
      lines: knownLines(own),
      mentionCount: s.mentionCount,
      quoteCount: s.quoteCount,
      importance: importanceOf(s.mentionCount, s.quoteCount),
      cooccurring,
      passages,
    };
  });
}

/** The first words of each paragraph, by paragraph id: enough to read a heading. */
function paragraphOpenings(tokens: TokenColumns): string[] {
  const words: string[][] = [];
  for (let i = 0; i < tokens.paragraph.length; i++) {
    const p = tokens.paragraph[i]!;
    if (p < 0) continue;
    const list = (words[p] ??= []);
    if (list.length <= MAX_HEADING_WORDS + 1) list.push(tokens.word[i]!);
  }
  return Array.from(words, (w) => detokenize((w ?? []).join(" ")));
}

/**
 * "The salesman", "the old woman": someone known by what they are, not a name. Such a speaker is
 * listed by importance under the cap like anyone, but is no story's lead: in a story they are
 * usually a named person the engine did not link to the description.
 */
function isDescription(name: string): boolean {
  return /^the\s/i.test(name) && /\s\p{Ll}/u.test(name.slice(3));
}

/**
 * The characters a collection of stories keeps whatever the cap: those who speak in several
 * stories (RECURRING_MIN_QUOTES in each of two or more: the detective and his friend), and in each
 * story its STORY_LEADS most important characters who speak there and in no other story (the
 * client, the villain), by the times that story names them and their lines there. Ranked over the whole book, a
 * story's own people compete with the whole book's and the cap drops them.
 */
function storyLeads(eligible: readonly Merged[], parsed: ParsedBookNlp, tokens: TokenColumns, stories: readonly number[]): Set<Merged> {
  const owner = new Map<number, number>();
  eligible.forEach((m, i) => m.ids.forEach((id) => owner.set(id, i)));
  const storyOfParagraph = (p: number): number => {
    let k = -1;
    while (k + 1 < stories.length && stories[k + 1]! <= p) k++;
    return k;
  };
  const storyOf = (token: number): number => (token >= 0 && token < tokens.paragraph.length ? storyOfParagraph(tokens.paragraph[token]!) : -1);
  const mentions = eligible.map(() => new Float64Array(stories.length));
  const quotes = eligible.map(() => new Float64Array(stories.length));
  for (const e of parsed.entities) {
    const i = owner.get(e.coref);
    const k = storyOf(e.start);
    // Names only: a pronoun coreference gave the story's first woman (a passer-by) every later "she".
    if (i !== undefined && k >= 0 && e.cat === "PER" && e.prop === "PROP") mentions[i]![k]!++;
  }
  for (const q of parsed.quotes) {
    const i = q.charId === null ? undefined : owner.get(q.charId);
    const k = storyOf(q.quoteStart);
    if (i !== undefined && k >= 0) quotes[i]![k]!++;
  }
  const kept = new Set<Merged>();
  const recurring = eligible.map((m, i) => {
    const spokenIn = quotes[i]!.filter((n) => n >= RECURRING_MIN_QUOTES).length;
    if (spokenIn >= 2) kept.add(m);
    return spokenIn >= 2;
  });
  for (let k = 0; k < stories.length; k++) {
    eligible
      .map((m, i) => ({ m, i, weight: importanceOf(mentions[i]![k]!, quotes[i]![k]!) }))
      .filter(({ m, i }) => !recurring[i] && quotes[i]![k]! > 0 && !isDescription(m.summary.name))
      .sort((a, b) => b.weight - a.weight)
      .slice(0, STORY_LEADS)
      .forEach(({ m }) => kept.add(m));
  }
  return kept;
}

export function countShared<T>(a: ReadonlySet<T>, b: ReadonlySet<T>): number {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  let n = 0;
  for (const x of small) if (large.has(x)) n++;
  return n;
}
