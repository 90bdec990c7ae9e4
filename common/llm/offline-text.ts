/**
 * Text features of the offline provider: content words, lexical vectors and sentences. Everything
 * the offline provider decides (which quote answers a message, which passage to cite, which words
 * are salient) is measured with these, so its embeddings and its choices agree.
 *
 * The vectors are lexical, not semantic: two texts are close when they share words or word pairs,
 * and "ship" is as far from "boat" as from "tea". Features are the content words (after the
 * tokenizer of the embedded BM25 index, so Urdu and other scripts are folded the same way) and the
 * pairs of adjacent content words, hashed into OFFLINE_EMBEDDING_DIMENSION signed buckets with
 * sublinear weights (1 + ln tf; pairs at half weight), then scaled to unit length.
 *
 * Pure: web-standard APIs only.
 */
import { endsInAbbreviation } from "../abbreviations.ts";
import { fnv1a } from "../hash.ts";
import { normalizeText, tokenize } from "../text-index/tokenize.ts";

/** Length of every offline embedding. */
export const OFFLINE_EMBEDDING_DIMENSION = 512;
/** Word pairs count half as much as single words: they sharpen matches without drowning them. */
const BIGRAM_WEIGHT = 0.5;

const WORD = /[\p{L}\p{M}\p{N}]+/gu;

/**
 * Function words that say nothing about what a text is about. English (with the pieces contractions
 * split into, since words break at apostrophes) and the commonest Urdu particles, postpositions,
 * pronouns and auxiliaries; folded like the text they are compared with.
 */
const STOP_WORDS = new Set(
  [
    "a about above after again against all also am an and any are as at be because been before being below between both but by",
    "can could did do does doing done down during each even ever every few for from further get gets got had has have having he",
    "her here hers herself him himself his how i if in into is it its itself just let like may me might more most much must my",
    "myself never no nor not now of off on once one only or other ought our ours ourselves out over own quite rather really said",
    "same say says shall she should so some still such than that the their theirs them themselves then there these they thing",
    "things this those though through thus to too under until up upon us very was we well were what when where whether which",
    "while who whom whose why will with within without would yes yet you your yours yourself yourselves",
    "s t d ll m re ve don didn doesn isn wasn weren aren won wouldn couldn shouldn haven hasn hadn",
    "oh ah mr mrs miss ms dr sir madam",
    "tell told think thought know knew known feel felt seem seemed go goes went gone come came make made take took taken",
    "give gave given look looked want wanted mean meant",
    "کا کی کے ہے ہیں تھا تھی تھے ہو ہوا ہوئی ہوئے میں نے کو سے پر اور یہ وہ اس ان جو کہ بھی نہیں نہ تو ہی تک لیے کیا کر کرتا",
    "کرتی کرتے گیا گئی گئے رہا رہی رہے جب تب اب کچھ سب ایک مجھے میرا میری میرے ہم ہمارا تم تمہارا آپ وہی یہی کوئی کسی",
    "گا گی گے ساتھ بعد پہلے یا لیکن مگر اگر",
  ]
    .join(" ")
    .split(" ")
    .map(normalizeText),
);

/** True for a function word; `word` may be in any case or spelling normalizeText folds. */
export function isStopWord(word: string): boolean {
  return STOP_WORDS.has(normalizeText(word));
}

/** The text's content terms in order, folded and stemmed as the BM25 index does, function words dropped. */
export function contentTerms(text: string): string[] {
  const kept = (normalizeText(text).match(WORD) ?? []).filter((w) => !STOP_WORDS.has(w));
  return kept.length === 0 ? [] : tokenize(kept.join(" "));
}

export interface WordSpan {
  /** As written. */
  surface: string;
  /** Folded by normalizeText. */
  normalized: string;
  start: number;
  end: number;
}

/** Every word of the text with its position (punctuation between words is not a word). */
export function wordSpans(text: string): WordSpan[] {
  return Array.from(text.matchAll(WORD), (m) => ({
    surface: m[0],
    normalized: normalizeText(m[0]),
    start: m.index,
    end: m.index + m[0].length,
  }));
}

/** The text's words as written (punctuation dropped), function words removed. */
export function contentWords(text: string): string[] {
  return (text.match(WORD) ?? []).filter((w) => !isStopWord(w));
}

function addFeature(vector: Float64Array, feature: string, weight: number): void {
  const hash = fnv1a(feature);
  // The low bits pick the bucket and the top bit the sign, so collisions cancel out on average instead of piling up.
  vector[hash % OFFLINE_EMBEDDING_DIMENSION]! += hash & 0x80000000 ? -weight : weight;
}

function counts(items: readonly string[]): Map<string, number> {
  const map = new Map<string, number>();
  for (const item of items) map.set(item, (map.get(item) ?? 0) + 1);
  return map;
}

/**
 * The terms a lexical vector is built from: the content terms, or for a text made only of function
 * words ("Who are you?") those words, so it is described by something rather than by nothing.
 */
function featureTerms(text: string): string[] {
  const terms = contentTerms(text);
  return terms.length > 0 ? terms : tokenize(text);
}

function vectorOf(terms: readonly string[]): number[] {
  const vector = new Float64Array(OFFLINE_EMBEDDING_DIMENSION);
  for (const [term, tf] of counts(terms)) addFeature(vector, term, 1 + Math.log(tf));
  const pairs = terms.slice(1).map((term, i) => `${terms[i]} ${term}`);
  for (const [pair, tf] of counts(pairs)) addFeature(vector, pair, BIGRAM_WEIGHT * (1 + Math.log(tf)));
  let sum = 0;
  for (const x of vector) sum += x * x;
  const scale = sum === 0 ? 0 : 1 / Math.sqrt(sum);
  return Array.from(vector, (x) => x * scale);
}

/** Unit-length lexical vector of `text`; a text with no words at all is the zero vector. */
export function lexicalVector(text: string): number[] {
  return vectorOf(featureTerms(text));
}

/** Cosine similarity of two lexical vectors (both unit length or zero). */
export function similarity(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * (b[i] ?? 0);
  return dot;
}

/**
 * The candidates that share at least one term with `query`, most similar first (ties: earlier
 * first). Sharing is checked on the terms themselves because hashed buckets can collide, which
 * gives unrelated texts a small similarity of their own.
 */
export function rankBySimilarity(query: string, candidates: readonly string[]): { index: number; score: number }[] {
  const queryTerms = featureTerms(query);
  const wanted = new Set(queryTerms);
  const target = vectorOf(queryTerms);
  const ranked: { index: number; score: number }[] = [];
  candidates.forEach((candidate, index) => {
    const terms = featureTerms(candidate);
    if (terms.some((t) => wanted.has(t))) ranked.push({ index, score: similarity(target, vectorOf(terms)) });
  });
  return ranked.sort((a, b) => b.score - a.score || a.index - b.index);
}

/**
 * The candidates that share at least one term with `query`, those naming the most of the people and
 * places it names first ("Why did Lydia run away with Wickham?": a line about Wickham before one that
 * only shares "away"), then the most similar, then the earlier. A name is a capitalised word past
 * the query's first.
 */
export function rankByNamesThenSimilarity(query: string, candidates: readonly string[]): { index: number; score: number }[] {
  const names = new Set(
    (query.match(WORD) ?? [])
      .slice(1)
      .filter((w) => /^\p{Lu}/u.test(w) && w !== "I")
      .flatMap((w) => contentTerms(w)),
  );
  const named = (index: number) => new Set(featureTerms(candidates[index]!).filter((t) => names.has(t))).size;
  return rankBySimilarity(query, candidates)
    .map((r) => ({ ...r, named: named(r.index) }))
    .sort((a, b) => b.named - a.named || b.score - a.score || a.index - b.index)
    .map(({ index, score }) => ({ index, score }));
}

export interface RankedWord {
  /** The spelling the word first appeared in. */
  surface: string;
  /** Its folded, stemmed form (what lexical vectors and BM25 compare). */
  term: string;
  count: number;
}

/**
 * The content words of `text` by frequency, most frequent first (ties: first seen first); words
 * whose term is in `exclude` are skipped.
 */
export function rankedWords(text: string, exclude: ReadonlySet<string> = new Set()): RankedWord[] {
  const seen = new Map<string, RankedWord & { first: number }>();
  contentWords(text).forEach((surface, position) => {
    const term = contentTerms(surface)[0];
    if (!term || exclude.has(term)) return;
    const entry = seen.get(term);
    if (entry) entry.count++;
    else seen.set(term, { surface, term, count: 1, first: position });
  });
  return [...seen.values()]
    .sort((a, b) => b.count - a.count || a.first - b.first)
    .map(({ surface, term, count }) => ({ surface, term, count }));
}

/** The `limit` most frequent content words of `text` (see rankedWords), as first written. */
export function salientWords(text: string, limit: number, exclude?: ReadonlySet<string>): string[] {
  return rankedWords(text, exclude)
    .slice(0, limit)
    .map((w) => w.surface);
}

/** Single line breaks (and the indent after them) as spaces; blank lines kept. */
export function unwrapLines(text: string): string {
  return text.replace(/([^\n])[ \t]*\n(?![ \t]*\n)[ \t]*/g, "$1 ");
}

/**
 * The text as a reader sees it, without Gutenberg's plain-text markup: `_emphasis_` and `=bold=`
 * markers dropped (the words kept) and [Illustration: …] notes removed.
 */
export function withoutMarkup(text: string): string {
  return text
    .replace(/\[Illustration(?::[^\]]*)?\]/g, "")
    .replace(/(^|[^\p{L}\p{N}_])_(?=\S)([^_\n]*?\S)_(?![\p{L}\p{N}_])/gu, "$1$2")
    .replace(/(^|[^\p{L}\p{N}=])=(?=\S)([^=\n]*?\S)=(?![\p{L}\p{N}=])/gu, "$1$2")
    .replace(/[ \t]{2,}/g, " ");
}

const sentenceSegmenter = new Intl.Segmenter("und", { granularity: "sentence" });


/**
 * The text's sentences, trimmed, in order (Unicode sentence breaks: Urdu's ۔ ends one too). A piece
 * that starts with a lower-case letter goes on the sentence before it: Unicode breaks after a
 * question or exclamation whatever follows, which would cut the dialogue tag off `"Why?" asked Pim.`
 */
export function sentences(text: string): string[] {
  const result: string[] = [];
  let pending = "";
  // Unicode ends a sentence at every line break: a book's hard-wrapped lines ("more sedate than⏎
  // Elizabeth had expected.") are joined first, so only blank lines still separate.
  for (const { segment } of sentenceSegmenter.segment(unwrapLines(text))) {
    const sentence = segment.replace(/\s+/g, " ").trim();
    if (!sentence) continue;
    if (!pending && result.length > 0 && /^\p{Ll}/u.test(sentence)) {
      result[result.length - 1] += ` ${sentence}`;
      continue;
    }
    pending = pending ? `${pending} ${sentence}` : sentence;
    if (!endsInAbbreviation(pending)) {
      result.push(pending);
      pending = "";
    }
  }
  if (pending) result.push(pending);
  return result;
}

export function wordCount(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}

/** The first `max` words of `text`, with an ellipsis when some were cut. */
export function firstWords(text: string, max: number): string {
  const words = text.split(/\s+/).filter(Boolean);
  return words.length <= max ? words.join(" ") : `${words.slice(0, max).join(" ")}…`;
}
