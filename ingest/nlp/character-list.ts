// The step that turns BookNLP's output (either engine's, parsed by booknlp-files.ts) into the
// pipeline's character list: names, aliases, gender and spoken lines per character.

import { detokenize, stripQuoteMarks, type BookCharacter, type EntityRow, type MentionCount, type ParsedBookNlp } from "./booknlp-files.ts";
import { NICKNAMES } from "./lexicon.ts";

export type CharacterGender = "male" | "female" | "unknown";

export interface CharacterSummary {
  id: number;
  /** Best proper name ("Elizabeth Bennet"), else the commonest description ("the stranger"). */
  name: string;
  aliases: string[];
  gender: CharacterGender;
  /** What the character says, in book order, without the quotation marks. */
  quotes: string[];
  mentionCount: number;
  quoteCount: number;
}

export const DEFAULT_MIN_MENTIONS = 5;
export const DEFAULT_MIN_QUOTES = 0;
/**
 * A bound on the engine's list of candidates when it is asked for one without a bound of its own. Not
 * the cap on the characters a book keeps: selection (ingest/characters/character-selection.ts) reads the whole
 * list and applies its own, DEFAULT_CHARACTER_CAP.
 */
export const DEFAULT_MAX_CANDIDATES = 40;
export const DEFAULT_MAX_ALIASES = 12;
/** A spoken line counts this many mentions when ranking characters by importance. */
export const QUOTE_WEIGHT = 3;
export const NARRATOR_NAME = "Narrator";

export interface CharacterListOptions {
  minMentions?: number;
  minQuotes?: number;
  maxCharacters?: number;
  maxAliases?: number;
}

const TITLED = /^(?:mr|mrs|ms|miss|dr|sir|lady|lord|captain|colonel|major|general|admiral|rev|professor|madame?|mme|mlle|monsieur|master)\b/i;
// Titles, ranks and kinship words that go before a name ("Princess Mary" is no surname "Mary").
const TITLE_PREFIX =
  /^(?:(?:mr|mrs|ms|miss|dr|doctor|sir|lady|lord|captain|colonel|major|general|admiral|lieutenant|sergeant|inspector|rev|reverend|professor|madame?|mme|mlle|monsieur|master|mistress|prince|princess|count|countess|duke|duchess|baron|baroness|king|queen|emperor|empress|st|saint|father|mother|sister|brother|uncle|aunt|cousin)\.?\s+)+/i;

// Titles that go before a surname, never a given name ("Mr. Tobin"; but "Miss Lydia", "Princess Mary").
const SURNAME_TITLE = /^(?:mr|mrs|ms|dr|doctor|captain|colonel|major|general|admiral|lieutenant|sergeant|inspector|rev|reverend|professor|monsieur|madame?|mme)\.?\s+\S+$/i;

/** "Miss Mary Sutherland" → "Mary Sutherland"; a name without a title is returned as it is. */
export function withoutTitle(name: string): string {
  return name.replace(TITLE_PREFIX, "");
}

/**
 * Surnames a character's names show, lower-cased: the last word of a name of two words or more
 * after its titles ("Mary Sutherland") and a single word after a surname's title ("Mr. Tobin"). A bare
 * single word, or one after "Miss" or "Princess", says nothing: it may be a given name.
 */
export function surnamesOf(names: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const n of names) {
    const bare = withoutTitle(n).trim().split(/\s+/);
    if (bare.length >= 2 || (bare.length === 1 && SURNAME_TITLE.test(n.trim()))) out.add(bare[bare.length - 1]!.toLowerCase());
  }
  return out;
}

/** Given names a character's names show, lower-cased: the first word of a name of two words or more after its titles. */
export function givenNamesOf(names: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const n of names) {
    const bare = withoutTitle(n).trim().split(/\s+/);
    if (bare.length >= 2) out.add(bare[0]!.toLowerCase());
  }
  return out;
}

/**
 * Share of a character's name mentions a bare surname must have to stay an alias when someone else
 * shares that surname: "Darcy" is Mr. Darcy's usual name; the one "Bennet" clustered with Elizabeth
 * is not hers, and as an alias it would make "bennet" pick her out of the family.
 */
export const SHARED_SURNAME_MIN_SHARE = 0.1;
/** …and at least this many uses: one stray "Tobin" is no evidence of whom the family name means. */
export const SHARED_SURNAME_MIN_USES = 5;
/** …and, when two characters are both usually called by it, this many times as often as the other. */
export const SHARED_SURNAME_LEAD = 2;
const MIN_FULLER_NAME_COUNT = 2;
const WIFE = /^(?:mrs|lady|madame?|mme|signora|frau)\.?\s+\S+$/i;
const LEADING_MODIFIERS = /^(?:(?:poor|dear|dearest|my|little|old|young|good|the|a|an|this|that|o|oh)\s+)+/i;

function cleanName(n: string): string {
  const d = detokenize(n);
  const stripped = d.replace(LEADING_MODIFIERS, "");
  // "the Hatter", "the lamplighter" keep their article: without it the name reads as a trade.
  const keepArticle = /^the\s/i.test(d) && stripped.split(" ").length === 1;
  const name = keepArticle ? d.replace(/^the/i, "The") : stripped || d;
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/**
 * The most frequent proper name; a bare one ("Emma") is lengthened to its commonest fuller form
 * ("Emma Woodhouse"). A titled name ("Mr. Knightley") is already how the book refers to them.
 */
function bestName(proper: MentionCount[], common: MentionCount[], id: number): string | undefined {
  const merged = new Map<string, number>();
  for (const m of proper) {
    const n = cleanName(m.n);
    if (n) merged.set(n, (merged.get(n) ?? 0) + m.c);
  }
  const ranked = [...merged.entries()].sort((a, b) => b[1] - a[1]);
  const top = ranked[0];
  if (top) {
    const words = top[0].split(" ");
    if (words.length > 1 || TITLED.test(top[0])) return top[0];
    const fuller = ranked.find(([n, c]) => c >= MIN_FULLER_NAME_COUNT && !TITLE_PREFIX.test(n) && n.split(" ").length > 1 && n.split(" ").includes(words[0]!));
    if (fuller) return fuller[0];
    // Only ever written with a title ("Miss Mary Holder"): that name without it. A bare given name
    // may be another character's too (the "Mary" of another story).
    const titled = ranked.filter(([n]) => TITLE_PREFIX.test(n)).map(([n]) => withoutTitle(n)).find((n) => n.split(" ").length > 1 && n.split(" ")[0] === words[0]);
    return titled ?? top[0];
  }
  const nominal = [...common].sort((a, b) => b.c - a.c)[0];
  if (nominal && nominal.c >= 2) return cleanName(nominal.n);
  return id === 0 ? NARRATOR_NAME : undefined;
}

function genderOf(label: string | null): CharacterGender {
  if (label === null) return "unknown";
  if (label.startsWith("he")) return "male";
  if (label.startsWith("she")) return "female";
  return "unknown";
}

/** Mention lists per cluster rebuilt from .entities, for output that has no .book file. */
function charactersFromEntities(entities: EntityRow[]): BookCharacter[] {
  const byId = new Map<number, { count: number; proper: Map<string, number>; common: Map<string, number>; pronoun: Map<string, number> }>();
  for (const e of entities) {
    if (e.cat !== "PER" || e.coref < 0) continue;
    let c = byId.get(e.coref);
    if (!c) byId.set(e.coref, (c = { count: 0, proper: new Map(), common: new Map(), pronoun: new Map() }));
    c.count++;
    const bucket = e.prop === "PROP" ? c.proper : e.prop === "NOM" ? c.common : c.pronoun;
    bucket.set(e.text, (bucket.get(e.text) ?? 0) + 1);
  }
  const list = (m: Map<string, number>) => [...m.entries()].map(([n, c]) => ({ n, c })).sort((a, b) => b.c - a.c);
  return [...byId.entries()].map(([id, c]) => {
    const pron = c.pronoun;
    const he = (pron.get("he") ?? 0) + (pron.get("him") ?? 0) + (pron.get("his") ?? 0) + (pron.get("He") ?? 0) + (pron.get("His") ?? 0);
    const she = (pron.get("she") ?? 0) + (pron.get("her") ?? 0) + (pron.get("She") ?? 0) + (pron.get("Her") ?? 0);
    const label = he + she === 0 ? null : he >= she ? "he/him/his" : "she/her";
    return {
      id,
      count: c.count,
      genderLabel: label,
      genderConfidence: he + she === 0 ? null : Math.max(he, she) / (he + she),
      mentions: { proper: list(c.proper), common: list(c.common), pronoun: list(c.pronoun) },
    };
  });
}

/**
 * The pipeline's character list: one entry per character with a usable name, ranked by
 * importance (mentions plus weighted quotes), filtered by minimum mentions and quotes.
 */
export function toCharacterList(parsed: ParsedBookNlp, options: CharacterListOptions = {}): CharacterSummary[] {
  const minMentions = options.minMentions ?? DEFAULT_MIN_MENTIONS;
  const minQuotes = options.minQuotes ?? DEFAULT_MIN_QUOTES;
  const maxCharacters = options.maxCharacters ?? DEFAULT_MAX_CANDIDATES;
  const maxAliases = options.maxAliases ?? DEFAULT_MAX_ALIASES;
  const source = parsed.characters.length > 0 ? parsed.characters : charactersFromEntities(parsed.entities);
  const quotesBy = new Map<number, string[]>();
  for (const q of parsed.quotes) {
    if (q.charId === null) continue;
    const text = stripQuoteMarks(q.quote);
    if (!text) continue;
    const list = quotesBy.get(q.charId) ?? [];
    list.push(text);
    quotesBy.set(q.charId, list);
  }
  const out: CharacterSummary[] = [];
  /** Every name form of each character, lower-cased, with its uses: whom a shared name usually means. */
  const formUses = new Map<CharacterSummary, Map<string, number>>();
  for (const c of source) {
    const name = bestName(c.mentions.proper, c.mentions.common, c.id);
    if (!name) continue;
    const quotes = quotesBy.get(c.id) ?? [];
    if (c.count < minMentions || quotes.length < minQuotes) continue;
    const seen = new Set([name.toLowerCase()]);
    const aliases: string[] = [];
    for (const m of [...c.mentions.proper].sort((a, b) => b.c - a.c)) {
      const a = detokenize(m.n);
      if (!a || seen.has(a.toLowerCase())) continue;
      seen.add(a.toLowerCase());
      aliases.push(a);
      if (aliases.length >= maxAliases) break;
    }
    const summary: CharacterSummary = {
      id: c.id,
      name,
      aliases,
      gender: genderOf(c.genderLabel),
      quotes,
      mentionCount: c.count,
      quoteCount: quotes.length,
    };
    const uses = new Map<string, number>();
    for (const m of c.mentions.proper) {
      const a = detokenize(m.n).toLowerCase();
      uses.set(a, (uses.get(a) ?? 0) + m.c);
    }
    formUses.set(summary, uses);
    out.push(summary);
  }
  out.sort((a, b) => b.mentionCount + QUOTE_WEIGHT * b.quoteCount - (a.mentionCount + QUOTE_WEIGHT * a.quoteCount) || a.id - b.id);
  const kept = out.slice(0, maxCharacters);
  dropSharedSurnames(kept, formUses);
  dropSharedAliases(kept, formUses);
  return kept;
}

/**
 * An alias two listed characters both carry ("Nicholas" of two Nicholases, "Mr. Sholto" of two
 * brothers), or one carries and the other goes by a familiar form of ("Catherine" of Lady Catherine
 * and of Kitty), stays only with the one the book calls so SHARED_SURNAME_LEAD times as often as any
 * other; when neither leads, it names neither for sure and is nobody's.
 */
function dropSharedAliases(list: CharacterSummary[], formUses: Map<CharacterSummary, Map<string, number>>): void {
  const claims = new Map<string, { c: CharacterSummary; n: number }[]>();
  const claim = (key: string, c: CharacterSummary, n: number) => {
    const held = claims.get(key);
    if (held) held.push({ c, n });
    else claims.set(key, [{ c, n }]);
  };
  for (const c of list) {
    const uses = formUses.get(c)!;
    for (const a of c.aliases) claim(a.toLowerCase(), c, uses.get(a.toLowerCase()) ?? 0);
    // "Kitty" is a "Catherine" too: the given name a familiar form stands for is claimed by whoever goes by it.
    for (const [form, n] of uses) for (const full of NICKNAMES.get(form) ?? []) claim(full, c, n);
  }
  for (const [alias, claimants] of claims) {
    if (new Set(claimants.map((x) => x.c)).size < 2) continue;
    const lead = leader(claimants);
    for (const { c } of claimants) if (c !== lead) c.aliases = c.aliases.filter((a) => a.toLowerCase() !== alias);
  }
}

/** Who a name shared by several usually means: the one called so SHARED_SURNAME_LEAD times as often as any other, if any. */
function leader(uses: { c: CharacterSummary; n: number }[]): CharacterSummary | undefined {
  const [top, next] = uses.filter((u) => u.n > 0).sort((a, b) => b.n - a.n);
  return top !== undefined && (next === undefined || top.n >= SHARED_SURNAME_LEAD * next.n) ? top.c : undefined;
}

/** For each bare word, the characters usually called by it (SHARED_SURNAME_MIN_USES, SHARED_SURNAME_MIN_SHARE) and how often. */
function usualBareUses(list: readonly CharacterSummary[], formUses: Map<CharacterSummary, Map<string, number>>): Map<string, { c: CharacterSummary; n: number }[]> {
  const out = new Map<string, { c: CharacterSummary; n: number }[]>();
  for (const c of list) {
    const uses = formUses.get(c)!;
    let total = 0;
    for (const n of uses.values()) total += n;
    for (const [form, n] of uses) {
      if (form.includes(" ") || n < SHARED_SURNAME_MIN_USES || n < SHARED_SURNAME_MIN_SHARE * total) continue;
      const users = out.get(form) ?? [];
      users.push({ c, n });
      out.set(form, users);
    }
  }
  return out;
}

/**
 * A bare surname that other characters' names show too ("Bennet" beside Mr. Bennet, Mrs. Bennet
 * and Jane Bennet) stays an alias only of a character the book usually calls by it
 * (SHARED_SURNAME_MIN_USES and SHARED_SURNAME_MIN_SHARE), and only of one: otherwise a reader's
 * "bennet" would pick one of the family silently. Two who are both called by it (Major Sholto and
 * his son) keep it only if one is called so at least SHARED_SURNAME_LEAD times as often; a wife
 * known only as "Mrs. <Surname>", named about as often, shares every bare use of it, so with her in
 * the list it is nobody's.
 */
function dropSharedSurnames(list: CharacterSummary[], formUses: Map<CharacterSummary, Map<string, number>>): void {
  const owners = new Map<string, Set<CharacterSummary>>();
  for (const c of list) {
    for (const s of surnamesOf([c.name, ...c.aliases])) {
      const set = owners.get(s) ?? new Set();
      set.add(c);
      owners.set(s, set);
    }
  }
  // How often each wife known only as "Mrs. <Surname>" is named, by surname.
  const wives = new Map<string, number>();
  for (const c of list) {
    if (!WIFE.test(c.name)) continue;
    const surname = withoutTitle(c.name).toLowerCase();
    wives.set(surname, (wives.get(surname) ?? 0) + [...formUses.get(c)!.values()].reduce((a, b) => a + b, 0));
  }
  const usual = usualBareUses(list, formUses);
  const keeper = new Map<string, CharacterSummary | undefined>();
  for (const [surname, set] of owners) {
    const users = usual.get(surname) ?? [];
    const lead = leader(users);
    // A wife the book names about as often as it says the bare surname shares it; a "Mrs. Darcy"
    // met once at the end does not take "Darcy" from Mr. Darcy.
    const leadUses = users.find((u) => u.c === lead)?.n ?? 0;
    const wife = set.size > 1 && lead !== undefined && SHARED_SURNAME_LEAD * (wives.get(surname) ?? 0) >= leadUses;
    keeper.set(surname, wife ? undefined : lead);
  }
  for (const c of list) c.aliases = c.aliases.filter((a) => a.includes(" ") || !owners.has(a.toLowerCase()) || keeper.get(a.toLowerCase()) === c);
}
