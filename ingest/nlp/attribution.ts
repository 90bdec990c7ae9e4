import type { Character } from "./characters.ts";
import { isVocative } from "./characters.ts";
import { FIRST_PERSON, GENDERED_NOUNS, PREPOSITIONS, SPEECH_VERBS, type Gender } from "./lexicon.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";

/** Character id 0 is the first-person narrator, as in BookNLP. */
export const NARRATOR_ID = 0;

export interface Attribution {
  /** Per quote: speaker character id, or -1. */
  speaker: Int32Array;
  /** Per quote: token span of the mention that names the speaker (-1 when inferred). */
  mentionStart: Int32Array;
  mentionEnd: Int32Array;
  /** Per quote: addressee character id, or -1. */
  addressee: Int32Array;
}

export interface AttributionInput {
  tok: Tokenized;
  quotes: Quote[];
  inQuote: Uint8Array;
  names: NameMention[];
  chars: Character[];
  /** Whether the book has a first-person narrator (character NARRATOR_ID). */
  narrator: boolean;
}

type Tag =
  | { kind: "char"; char: number; start: number; end: number }
  /** goesOn: the verb carries on a speech ("she added", "he continued"). */
  | { kind: "pronoun"; gender: Gender | "i"; at: number; goesOn?: boolean }
  /** "his wife": the wife of whoever "his" is, found through a shared surname. */
  | { kind: "relation"; gender: Gender; possessor: Gender; title: string; at: number };

// Family words whose holder shares the possessor's surname under a known title.
const RELATIONS: Record<string, { gender: Gender; title: string }> = {
  wife: { gender: "f", title: "mrs" },
  mother: { gender: "f", title: "mrs" },
  husband: { gender: "m", title: "mr" },
  father: { gender: "m", title: "mr" },
};

// Verbs by which a speaker carries on after a pause, so the one who spoke last is still speaking.
const CONTINUING = new Set(["added", "continued", "resumed", "pursued"]);
const SKIPPABLE = new Set([",", "!", "?", "\u2014", "--", "-", ";", ":", "_", "."]);
const ADVERBS = new Set(["then", "again", "now", "at", "once", "still", "presently", "suddenly", "simply", "only", "quietly", "softly", "gravely", "calmly", "coldly", "eagerly", "warmly", "sharply", "slowly"]);
const MAX_TAG_DISTANCE = 14;
// A narration gap longer than this (in tokens) between two quoted paragraphs ends a conversation.
// Any narration paragraph at all: on the PDNC dev novels, turn-taking carried across one does more
// harm (the narration brings in, moves or addresses someone) than good.
const CONVERSATION_GAP_TOKENS = 0;
// How many mentions back a he/she or an untagged turn looks for its speaker. Twenty is best on the
// ten studied dev novels (40 and 10 are each about 0.2 point lower): someone last named further
// back than that is seldom the one speaking.
const SALIENCE_WINDOW = 20;
// The longest paragraph of narration read as an action beat between two turns.
const BEAT_TOKENS = 12;

function isAdverb(w: string): boolean {
  return ADVERBS.has(w) || (w.length > 4 && w.endsWith("ly"));
}

function pronounGender(lc: string): Gender | "i" | undefined {
  if (lc === "he") return "m";
  if (lc === "she") return "f";
  if (lc === "i") return "i";
  return undefined;
}

export function attributeSpeakers(input: AttributionInput): Attribution {
  const { tok, quotes, inQuote, names, chars, narrator } = input;
  const { text, lower, inSentence } = tok;
  const n = quotes.length;
  const speaker = new Int32Array(n).fill(-1);
  const mentionStart = new Int32Array(n).fill(-1);
  const mentionEnd = new Int32Array(n).fill(-1);
  const addressee = new Int32Array(n).fill(-1);

  const nameAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0 && chars[m.char]!.person) nameAt[m.start] = k;
  });
  const isPerson = (c: number) => c === NARRATOR_ID && narrator ? true : c >= 0 && chars[c]!.person;
  const genderOf = (c: number): Gender | undefined => (c >= 0 && c < chars.length ? chars[c]!.gender : undefined);

  const nameEndingAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0) nameEndingAt[m.end] = k;
  });
  // "said the young man", "cried his wife": a description that only gives a gender, read like he/she.
  const describedGender = (j: number, hi: number): Tag | undefined => {
    const det = lower[j]!;
    if (det !== "the" && det !== "his" && det !== "her" && det !== "my" && det !== "a" && det !== "their") return undefined;
    for (let k = j + 1; k <= Math.min(hi, j + 3); k++) {
      const noun = lower[k]!;
      const relation = RELATIONS[noun];
      if (relation && k === j + 1 && (det === "his" || det === "her")) {
        return { kind: "relation", gender: relation.gender, possessor: det === "his" ? "m" : "f", title: relation.title, at: k };
      }
      const g = GENDERED_NOUNS.get(noun);
      if (g) return { kind: "pronoun", gender: g, at: k };
      if (!/^\p{L}+$/u.test(text[k]!)) break;
    }
    return undefined;
  };

  const subject = (v: number, lo: number, hi: number): Tag | undefined => {
    const tag = subjectOf(v, lo, hi);
    if (tag?.kind === "pronoun" && CONTINUING.has(lower[v]!)) tag.goesOn = true;
    return tag;
  };
  // Subject of a speech verb next to the verb at v: "said Jane", "Jane said", "she replied".
  const subjectOf = (v: number, lo: number, hi: number): Tag | undefined => {
    let j = v + 1;
    if (j <= hi && isAdverb(lower[j]!)) j++;
    if (j <= hi) {
      const k = nameAt[j]!;
      if (k >= 0) return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      const g = pronounGender(lower[j]!);
      if (g) return { kind: "pronoun", gender: g, at: j };
      const d = describedGender(j, hi);
      if (d) return d;
    }
    for (let i = v - 1, skipped = 0; i >= lo && skipped <= 2; i--) {
      const lc = lower[i]!;
      const g = pronounGender(lc);
      if (g) return { kind: "pronoun", gender: g, at: i };
      const k = nameEndingAt[i]!;
      if (k >= 0 && isPerson(names[k]!.char)) return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      if (!isAdverb(lc)) break;
      skipped++;
    }
    return undefined;
  };

  /** Dialogue tag in the narration right after a quote ("…," said Jane / "…," she replied). */
  const tagAfter = (lo: number, hi: number): Tag | undefined => {
    let i = lo;
    while (i <= hi && SKIPPABLE.has(text[i]!)) i++;
    const limit = Math.min(hi, i + 5);
    for (let v = i; v <= limit; v++) {
      if (SPEECH_VERBS.has(lower[v]!)) return subject(v, i, Math.min(hi, v + 5));
    }
    return undefined;
  };

  /** Dialogue tag in the narration just before a quote ("Jane said:" / "Then said he,"). */
  const tagBefore = (lo: number, hi: number): Tag | undefined => {
    for (let v = hi; v >= Math.max(lo, hi - MAX_TAG_DISTANCE); v--) {
      if (SPEECH_VERBS.has(lower[v]!)) return subject(v, Math.max(lo, v - 6), hi);
    }
    return undefined;
  };

  /** First person named (or he/she) in the narration that opens a paragraph before its first quote. */
  const leadSubject = (lo: number, hi: number): Tag | undefined => {
    for (let i = lo; i <= hi; i++) {
      const k = nameAt[i]!;
      if (k >= 0) {
        const prev = lower[i - 1];
        if (PREPOSITIONS.has(prev ?? "")) continue;
        return { kind: "char", char: names[k]!.char, start: names[k]!.start, end: names[k]!.end };
      }
      const g = pronounGender(lower[i]!);
      if (g && inSentence[i]! <= 1) return { kind: "pronoun", gender: g, at: i };
    }
    return undefined;
  };

  /**
   * A one-line paragraph of action between two turns ("He shook his head laughing."): who acts in
   * it, when it opens on a name or on he/she for one of the last two speakers; -1 otherwise.
   */
  const beatSubject = (para: number, speakers: number[]): number => {
    const lo = tok.paragraphStarts[para]!;
    const hi = tok.paragraphStarts[para + 1]! - 1;
    if (hi - lo + 1 > BEAT_TOKENS) return -1;
    for (let i = lo; i <= hi; i++) if (inQuote[i]) return -1;
    const k = nameAt[lo]!;
    if (k >= 0) return names[k]!.char;
    const g = pronounGender(lower[lo]!);
    if (g === undefined || g === "i") return -1;
    return speakers.find((c) => c >= 0 && genderOf(c) === g) ?? -1;
  };

  // "turning to Jane", "said he to Elizabeth": the narration names who is spoken to.
  // "Yes, sir." / "Indeed, madam!": the listener is a man, or a woman, even unnamed.
  const listenerGender = (qs: number[]): Gender | undefined => {
    for (const qk of qs) {
      const q = quotes[qk]!;
      for (let i = q.start + 1; i < q.end; i++) {
        const g = ADDRESS_GENDER.get(lower[i]!);
        if (g && isVocative(tok, { start: i, end: i, inQuote: true })) return g;
      }
    }
    return undefined;
  };

  const turnedTo = (lo: number, hi: number): number => {
    for (let i = lo + 2; i <= hi; i++) {
      if (inQuote[i] || lower[i - 1] !== "to") continue;
      const k = nameAt[i]!;
      // "said he to Elizabeth": the verb may stand before the speaker.
      const verb = pronounGender(lower[i - 2]!) !== undefined ? (lower[i - 3] ?? "") : lower[i - 2]!;
      if (k >= 0 && (verb === "turned" || verb === "turning" || SPEECH_VERBS.has(verb))) return names[k]!.char;
    }
    return -1;
  };

  // Forward pass: salience list of recently mentioned people, tags resolved in reading order.
  const recent: number[] = [];
  const remember = (c: number) => {
    if (c < 0) return;
    recent.push(c);
  };
  // People named inside the quotes of the turn being read: a speaker seldom names themselves.
  let quoted: Set<number> = new Set();
  // Whom the turn right before addressed by name: "he said" in the reply is most likely them.
  let repliedTo = -1;
  // Who spoke the quote before this one, in this paragraph or an earlier one.
  let lastSpeaker = -1;
  /**
   * replier: whoever the next paragraph's tag names as answering this one. The paragraph's own
   * subject outranks it, but recency does not: the reply is not by the one who spoke.
   */
  const resolvePronoun = (g: Gender | "i", avoid: number, paraSubjects: number[], replier = -1): number => {
    if (g === "i") return narrator ? NARRATOR_ID : -1;
    // The first person of that gender the paragraph names, other than after a preposition, is the
    // one it is about ("Darcy … his eyes … towards Bingley … he turned and said").
    for (let k = 0; k < paraSubjects.length; k++) {
      const c = paraSubjects[k]!;
      if (genderOf(c) === g && !quoted.has(c)) return c;
    }
    if (repliedTo >= 0 && repliedTo !== avoid && repliedTo !== replier && genderOf(repliedTo) === g && !quoted.has(repliedTo) && isPerson(repliedTo)) return repliedTo;
    let fallback = -1;
    for (let k = recent.length - 1, seen = 0; k >= 0 && seen < SALIENCE_WINDOW; k--, seen++) {
      const c = recent[k]!;
      if (genderOf(c) !== g || !isPerson(c)) continue;
      if (c !== avoid && c !== replier && !quoted.has(c)) return c;
      if (fallback < 0) fallback = c;
    }
    return fallback;
  };
  const resolveTag = (tag: Tag, avoid: number, paraSubjects: number[], replier = -1): number => {
    if (tag.kind === "char") return tag.char;
    if (tag.kind === "pronoun") {
      if (tag.goesOn && lastSpeaker >= 0 && genderOf(lastSpeaker) === tag.gender && !quoted.has(lastSpeaker)) return lastSpeaker;
      return resolvePronoun(tag.gender, avoid, paraSubjects, replier);
    }
    const holder = resolvePronoun(tag.possessor, -1, paraSubjects);
    if (holder >= 0) {
      const surnames = chars[holder]!.lasts;
      const kin = chars.find((c) => c.id !== holder && c.person && c.titles.has(tag.title) && [...c.lasts].some((l) => surnames.has(l)));
      if (kin) return kin.id;
    }
    return resolvePronoun(tag.gender, avoid, paraSubjects, replier);
  };

  // Group quotes into paragraph units.
  const units: Unit[] = [];
  quotes.forEach((q, k) => {
    const last = units[units.length - 1];
    if (last && last.para === q.paragraph) last.qs.push(k);
    else units.push({ para: q.paragraph, qs: [k], speaker: -1, addressee: -1, continuation: q.continuation, recentAt: 0, named: new Set(), listenerGender: undefined });
  });

  const mentionsIn = (lo: number, hi: number, out: number[], subjects?: number[]) => {
    for (let i = lo; i <= hi; i++) {
      if (inQuote[i]) continue;
      const k = nameAt[i]!;
      const c = k >= 0 ? names[k]!.char : narrator && FIRST_PERSON.has(lower[i]!) ? NARRATOR_ID : -1;
      if (c < 0) continue;
      out.push(c);
      if (subjects && !PREPOSITIONS.has(lower[i - 1] ?? "")) subjects.push(c);
    }
  };

  let nextPara = 0;
  let prevUnitSpeaker = -1;
  let prevUnitPara = -2;
  let turnBefore = -1;
  let prevUnitAddressee = -1;
  /** The dialogue tag of quote qk, looked for up to the next quote and back to the narration from `from`. */
  const tagOf = (qk: number, from: number, nextStart: number): Tag | undefined => {
    const q = quotes[qk]!;
    return tagAfter(q.end + 1, Math.min(nextStart, q.end + MAX_TAG_DISTANCE)) ?? (q.start > from ? tagBefore(from, q.start - 1) : undefined);
  };
  // The speaker a unit's first quote is tagged with by name ("…," said Jane), or -1.
  const namedSpeakerOf = (u: Unit): number => {
    const nextStart = u.qs.length > 1 ? quotes[u.qs[1]!]!.start - 1 : tok.paragraphStarts[u.para + 1]! - 1;
    const tag = tagOf(u.qs[0]!, tok.paragraphStarts[u.para]!, nextStart);
    return tag?.kind === "char" ? tag.char : -1;
  };
  for (let ui = 0; ui < units.length; ui++) {
    const u = units[ui]!;
    const next = units[ui + 1];
    const replier = next && next.para === u.para + 1 && !next.continuation ? namedSpeakerOf(next) : -1;
    // Narration paragraphs between units feed salience.
    const paraStart = tok.paragraphStarts[u.para]!;
    const paraEnd = tok.paragraphStarts[u.para + 1]! - 1;
    if (nextPara < u.para) {
      const tmp: number[] = [];
      mentionsIn(tok.paragraphStarts[nextPara]!, paraStart - 1, tmp);
      for (const c of tmp) remember(c);
    }
    nextPara = u.para + 1;
    // A new paragraph of dialogue is a new speaker; after a narration paragraph anyone may go on.
    const avoid = u.para - prevUnitPara === 1 ? prevUnitSpeaker : -1;
    repliedTo = u.para - prevUnitPara === 1 ? prevUnitAddressee : -1;
    const beat = u.para - prevUnitPara === 2 ? beatSubject(u.para - 1, [prevUnitSpeaker, turnBefore]) : -1;
    const paraMentions: number[] = [];
    // Those of them not after a preposition ("towards Bingley", "with Jane"): who the paragraph is about.
    const paraSubjects: number[] = [];
    let cursor = paraStart;
    let lead: Tag | undefined;
    quoted = new Set();
    lastSpeaker = prevUnitSpeaker;
    let introduced = -1;
    for (const qk of u.qs) {
      const found = quotedNames(tok, names, quotes[qk]!);
      for (const m of found.vocatives) if (isPerson(m)) addressee[qk] = m;
      for (const m of found.all) if (isPerson(m)) quoted.add(m);
      if (introduced < 0 && isPerson(found.self)) introduced = found.self;
    }
    u.named = quoted;
    u.listenerGender = listenerGender(u.qs);
    for (let idx = 0; idx < u.qs.length; idx++) {
      const qk = u.qs[idx]!;
      const q = quotes[qk]!;
      const nextStart = idx + 1 < u.qs.length ? quotes[u.qs[idx + 1]!]!.start - 1 : paraEnd;
      mentionsIn(cursor, q.start - 1, paraMentions, paraSubjects);
      const tag = tagOf(qk, cursor, nextStart);
      if (!tag && idx === 0 && q.start > cursor) lead = leadSubject(cursor, q.start - 1);
      if (tag) {
        const c = resolveTag(tag, avoid, paraSubjects, replier);
        if (c >= 0) {
          speaker[qk] = c;
          // A he/she tag read from whoever was named last is a guess turn order may overrule; one
          // read from the person the paragraph is about, or a tag that names, is not.
          if (tag.kind === "pronoun" && tag.gender !== "i" && !paraSubjects.includes(c)) u.guessed ??= { gender: tag.gender, speaker: c };
          else u.certain = true;
          if (tag.kind === "char") {
            mentionStart[qk] = tag.start;
            mentionEnd[qk] = tag.end;
          } else {
            mentionStart[qk] = tag.at;
            mentionEnd[qk] = tag.at;
          }
        }
      }
      if (speaker[qk]! >= 0) lastSpeaker = speaker[qk]!;
      cursor = q.end + 1;
    }
    // Quotes of one paragraph share a speaker unless tagged otherwise.
    let unitSpeaker = -1;
    for (const qk of u.qs) if (speaker[qk]! >= 0) {
      unitSpeaker = speaker[qk]!;
      break;
    }
    if (unitSpeaker < 0 && introduced >= 0) unitSpeaker = introduced;
    if (unitSpeaker < 0 && lead) {
      unitSpeaker = resolveTag(lead, avoid, [], replier);
    }
    if (unitSpeaker < 0 && u.continuation) unitSpeaker = prevUnitSpeaker;
    u.speaker = unitSpeaker;
    for (const qk of u.qs) if (addressee[qk]! >= 0) u.addressee = addressee[qk]!;
    if (u.addressee < 0) u.addressee = turnedTo(paraStart, paraEnd);
    // A turn right after someone's action answers them ("He shook his head laughing." / "Have I
    // said anything funny?"): it is said to them, so by someone else, and they reply next.
    if (u.addressee < 0 && beat >= 0 && beat !== u.speaker) u.addressee = beat;
    if (u.speaker >= 0 && u.speaker === u.addressee) u.speaker = -1;
    const tail: number[] = [];
    mentionsIn(cursor, paraEnd, tail);
    for (const c of paraMentions) remember(c);
    if (u.speaker >= 0) remember(u.speaker);
    for (const c of tail) remember(c);
    u.recentAt = recent.length;
    turnBefore = prevUnitSpeaker;
    prevUnitAddressee = u.addressee;
    prevUnitSpeaker = u.speaker;
    prevUnitPara = u.para;
  }

  // Conversations: runs of quoted paragraphs with little narration between them.
  const gapBefore = (k: number): number => {
    if (k === 0) return Infinity;
    const a = units[k - 1]!;
    const b = units[k]!;
    if (b.continuation) return 0;
    return tok.paragraphStarts[b.para]! - tok.paragraphStarts[a.para + 1]!;
  };
  let from = 0;
  for (let k = 1; k <= units.length; k++) {
    if (k < units.length && gapBefore(k) <= CONVERSATION_GAP_TOKENS) continue;
    decodeConversation(units.slice(from, k), recent, isPerson, genderOf);
    from = k;
  }

  for (const u of units) {
    for (const qk of u.qs) {
      if (u.guessed && !u.certain && speaker[qk] === u.guessed.speaker) speaker[qk] = u.speaker;
      if (speaker[qk]! < 0) speaker[qk] = u.speaker;
      if (addressee[qk]! < 0) addressee[qk] = u.addressee;
    }
  }
  return { speaker, mentionStart, mentionEnd, addressee };
}

/** The quotes of one paragraph: one turn of a conversation. */
interface Unit {
  para: number;
  /** Indices into the quote list. */
  qs: number[];
  speaker: number;
  addressee: number;
  continuation: boolean;
  /** Length of the salience list when this turn was read: who had been mentioned so far. */
  recentAt: number;
  /** People named inside this turn's quotes, vocatives included. */
  named: Set<number>;
  /** Gender of a listener addressed only as "sir" or "madam" in this turn. */
  listenerGender: Gender | undefined;
  /** A he/she tag resolved by recency alone: its gender is sure, the person is not. */
  guessed?: { gender: Gender; speaker: number };
  /** A tag settled who speaks (a name, or the person the paragraph is about). */
  certain?: boolean;
}

// Weights of the turn-taking score, tuned on the PDNC dev novels (a broad plateau around them).
const SCORE_SAME_TWICE = -6;
const SCORE_ALTERNATE = 3;
const SCORE_GUESSED_TAG = 1;
const SCORE_SALIENCE = 0.6;
const SCORE_NAMED_IN_TURN = -3;
const SCORE_REPLY_NAMES = 1.5;
const SCORE_NAMED_LISTENER = 2;
const SCORE_LISTENER_GENDER = -6;
const SCORE_RULED_OUT = -20;
const MAX_CANDIDATES = 6;
const IMPOSSIBLE = -1e9;

/**
 * Turn-taking over one conversation, decided for the whole run at once rather than turn by turn:
 * the speakers it can choose from are those its tags name, those addressed and the most salient
 * people before it; the best sequence (second-order Viterbi) rewards a turn that goes back to the
 * speaker two turns before (A B A B), a turn given to whoever the previous turn addressed by name
 * or to whoever the next turn names, the recently mentioned, and a he/she tag's own guess, and
 * penalises the same person twice in a row, a speaker named inside their own turn and a man
 * answering "madam". Tags that name someone, and a he/she read from the paragraph's own subject,
 * stay fixed; a he/she tag read from recency fixes only the gender, so one misread pronoun does
 * not set the phase of the whole exchange. Weighing the whole run lets a name at its end set the phase of
 * the turns before it as much as one at its start, where filling turn by turn let the first
 * guess decide.
 */
function decodeConversation(conv: Unit[], recent: number[], isPerson: (c: number) => boolean, genderOf: (c: number) => Gender | undefined): void {
  const open = conv.map((u) => u.speaker < 0 || (u.guessed !== undefined && !u.certain && u.speaker === u.guessed.speaker));
  if (!open.includes(true)) return;
  const cand: number[] = [];
  const add = (c: number) => {
    if (c >= 0 && !cand.includes(c)) cand.push(c);
  };
  for (const u of conv) add(u.speaker);
  for (const u of conv) if (isPerson(u.addressee)) add(u.addressee);
  for (let i = conv[0]!.recentAt - 1, seen = 0; i >= 0 && seen < SALIENCE_WINDOW && cand.length < MAX_CANDIDATES; i--, seen++) {
    if (isPerson(recent[i]!)) add(recent[i]!);
  }
  const m = cand.length;
  const n = conv.length;
  // What each turn says about its own speaker, whoever the turns around it are.
  const rank = new Int32Array(m);
  const own = new Float64Array(n * m);
  conv.forEach((u, k) => {
    const e = own.subarray(k * m, (k + 1) * m);
    if (open[k]) salienceRanks(cand, recent, u.recentAt, rank);
    const n1 = conv[k + 1];
    const p1 = conv[k - 1];
    const heard = p1 && !u.continuation && p1.addressee < 0 ? p1.listenerGender : undefined;
    for (let j = 0; j < m; j++) {
      const c = cand[j]!;
      if (!open[k]) {
        e[j] = c === u.speaker ? 0 : IMPOSSIBLE;
        continue;
      }
      // Speaking to oneself, or a "she" who is a man, is all but ruled out; only all but, so a run
      // always has some reading.
      let s = c === u.addressee || (u.guessed && genderOf(c) !== u.guessed.gender) ? SCORE_RULED_OUT : 0;
      if (c === u.guessed?.speaker) s += SCORE_GUESSED_TAG;
      if (rank[j]! >= 0) s += SCORE_SALIENCE / (1 + rank[j]!);
      if (u.named.has(c)) s += SCORE_NAMED_IN_TURN;
      if (n1 && !n1.continuation && n1.addressee === c) s += SCORE_REPLY_NAMES;
      if (heard && genderOf(c) !== undefined && genderOf(c) !== heard) s += SCORE_LISTENER_GENDER;
      e[j] = s;
    }
  });
  // State (a, b): the speakers of the turn before and of this turn; a = m before the first turn.
  const states = (m + 1) * m;
  const score = new Float64Array(n * states).fill(IMPOSSIBLE);
  const back = new Int32Array(n * states).fill(-1);
  for (let j = 0; j < m; j++) score[m * m + j] = own[j]!;
  // Only the alternation bonus depends on the speaker two turns back, so for each last speaker b the
  // best earlier path is either the best of all, or the one whose earlier speaker is the new one.
  const bestA = new Int32Array(m);
  const bestBefore = new Float64Array(m);
  for (let k = 1; k < n; k++) {
    const u = conv[k]!;
    const listener = conv[k - 1]!.addressee;
    const prevRow = (k - 1) * states;
    const row = k * states;
    for (let b = 0; b < m; b++) {
      bestBefore[b] = IMPOSSIBLE;
      for (let a = 0; a <= m; a++) {
        if (score[prevRow + a * m + b]! > bestBefore[b]!) {
          bestBefore[b] = score[prevRow + a * m + b]!;
          bestA[b] = a;
        }
      }
    }
    for (let b = 0; b < m; b++) {
      if (bestBefore[b]! <= IMPOSSIBLE / 2) continue;
      for (let c = 0; c < m; c++) {
        const e = own[k * m + c]!;
        if (e <= IMPOSSIBLE / 2) continue;
        let a = bestA[b]!;
        let t = bestBefore[b]!;
        // A paragraph that carries on a quote has its first paragraph's speaker, unless tags
        // on both say otherwise.
        if (u.continuation) {
          if (c !== b) t += SCORE_RULED_OUT;
        } else {
          if (c === b) t += SCORE_SAME_TWICE;
          else if (c === a) t += SCORE_ALTERNATE;
          else {
            // Ties go to the lower index, as a search over every earlier speaker would have it.
            const alternating = score[prevRow + c * m + b]! + SCORE_ALTERNATE;
            if (alternating > t || (alternating === t && c < a)) {
              t = alternating;
              a = c;
            }
          }
          if (cand[c] === listener && listener !== cand[b]) t += SCORE_NAMED_LISTENER;
        }
        score[row + b * m + c] = t + e;
        back[row + b * m + c] = a * m + b;
      }
    }
  }
  const last = (n - 1) * states;
  let best = 0;
  for (let i = 1; i < states; i++) if (score[last + i]! > score[last + best]!) best = i;
  if (score[last + best]! <= IMPOSSIBLE / 2) return;
  for (let k = n - 1; k >= 0; k--) {
    if (open[k]) conv[k]!.speaker = cand[best % m]!;
    best = back[k * states + best]!;
  }
}

/** rank[j]: how many other people were mentioned since cand[j] last was, before `end` in the salience list; -1 if not lately. */
function salienceRanks(cand: number[], recent: number[], end: number, rank: Int32Array): void {
  rank.fill(-1);
  const seen: number[] = [];
  for (let i = end - 1; i >= 0 && end - i <= SALIENCE_WINDOW; i--) {
    const c = recent[i]!;
    if (seen.includes(c)) continue;
    const j = cand.indexOf(c);
    if (j >= 0) rank[j] = seen.length;
    seen.push(c);
  }
}

const SELF_INTRODUCTION = new Set(["am", "'m", "\u2019m"]);
const ADDRESS_GENDER = new Map<string, Gender>([["sir", "m"], ["madam", "f"], ["ma'am", "f"], ["ma\u2019am", "f"], ["mum", "f"]]);

/** "I am Josiah Bounderby", "I'm only Ralph Moore", "my name is Alice": the speaker says who they are. */
function introducesSelf(tok: Tokenized, m: NameMention): boolean {
  const lower = tok.lower;
  let k = m.start - 1;
  if (lower[k] === "only" || lower[k] === "just") k--;
  if (SELF_INTRODUCTION.has(lower[k]!)) return lower[k - 1] === "i";
  return lower[k] === "is" && lower[k - 1] === "name" && lower[k - 2] === "my";
}

/**
 * Characters named inside the quote, those of them addressed by name, and the one the speaker
 * introduces as themselves (-1 if none); names are sorted by position.
 */
function quotedNames(tok: Tokenized, names: NameMention[], q: Quote): { all: number[]; vocatives: number[]; self: number } {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (names[mid]!.start < q.start) lo = mid + 1;
    else hi = mid;
  }
  const all: number[] = [];
  const vocatives: number[] = [];
  let self = -1;
  for (let k = lo; k < names.length && names[k]!.end <= q.end; k++) {
    const m = names[k]!;
    if (m.char < 0) continue;
    if (introducesSelf(tok, m)) {
      self = m.char;
      continue;
    }
    all.push(m.char);
    if (isVocative(tok, m)) vocatives.push(m.char);
  }
  return { all, vocatives, self };
}
