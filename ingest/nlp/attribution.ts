import type { Character } from "./character.ts";
import { decodeConversation, SALIENCE_WINDOW, turnsOf, type Unit } from "./conversation-decoding.ts";
import { createTagReader, pronounGender, type Tag } from "./dialogue-tags.ts";
import { COMPANY_PREPOSITIONS, FIRST_PERSON, PREPOSITIONS, UNMARRIED_NOUNS, type Gender } from "./lexicon.ts";
import { beatSubject, facedIn, leadIn, spokenTo } from "./narration-cues.ts";
import type { NameMention } from "./names.ts";
import type { Quote } from "./quotes.ts";
import type { Tokenized } from "./tokenizer.ts";
import { asksName, calledBearer, turnGenders, turnNames } from "./turn-cues.ts";

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

// A narration gap longer than this (in tokens) between two quoted paragraphs ends a conversation.
// Any narration paragraph at all: on the PDNC dev novels, turn-taking carried across one does more
// harm (the narration brings in, moves or addresses someone) than good.
const CONVERSATION_GAP_TOKENS = 0;
// The longest narration between two turns that still leaves them one exchange, whose last two
// speakers a he/she tag after that narration may be.
const EXCHANGE_GAP_TOKENS = 100;
const POSSESSIVES = new Set(["'s", "\u2019s"]);

/**
 * Speakers, read twice: the first reading knows who spoke an untagged turn only once its whole
 * conversation is decoded, so the second takes the first's speakers as the people taking part in
 * each exchange when it reads the he/she tags that follow.
 */
export function attributeSpeakers(input: AttributionInput): Attribution {
  const first = attributeOnce(input, undefined);
  return attributeOnce(input, first.speaker, first.voiced);
}

/**
 * One reading. prior: per quote, the speaker an earlier reading found, for the turns no tag settles;
 * voicedBefore: the people an earlier reading found a tag naming as speaker anywhere in the book.
 */
function attributeOnce(input: AttributionInput, prior: Int32Array | undefined, voicedBefore?: Set<number>): Attribution & { voiced: Set<number> } {
  // Whoever the book tags by name as speaking, in the reading before; the narrator always speaks.
  const voiced = new Set<number>();
  const mute = (c: number) => voicedBefore !== undefined && !voicedBefore.has(c) && c !== NARRATOR_ID;
  const { tok, quotes, inQuote, names, chars, narrator } = input;
  const { lower } = tok;
  const n = quotes.length;
  const speaker = new Int32Array(n).fill(-1);
  const mentionStart = new Int32Array(n).fill(-1);
  const mentionEnd = new Int32Array(n).fill(-1);
  const addressee = new Int32Array(n).fill(-1);

  const nameAt = new Int32Array(tok.count).fill(-1);
  names.forEach((m, k) => {
    if (m.char >= 0 && chars[m.char]!.person) nameAt[m.start] = k;
  });
  const married = (c: number) => c >= 0 && c < chars.length && chars[c]!.titles.has("mrs");
  const isPerson = (c: number) => c === NARRATOR_ID && narrator ? true : c >= 0 && chars[c]!.person;
  const genderOf = (c: number): Gender | undefined => (c >= 0 && c < chars.length ? chars[c]!.gender : undefined);

  const { tagOf, leadSubject } = createTagReader({ tok, quotes, names, nameAt, isPerson });
  const narration = { tok, inQuote, nameAt, names };

  // Forward pass: salience list of recently mentioned people, tags resolved in reading order.
  const recent: number[] = [];
  // The same without those named only after a preposition ("a letter from Jane", "thinking of
  // Darcy"), unless it keeps them company ("she met with Tom"): who is present in the scene, the
  // people a turn-taking reading chooses from.
  const present: number[] = [];
  const inScene = (i: number) => !PREPOSITIONS.has(lower[i - 1] ?? "") || COMPANY_PREPOSITIONS.has(lower[i - 1]!);
  // Per entry of `recent`, whether it was a name written as an owner ("Jane's last letter"); `at` is its token.
  const owned: boolean[] = [];
  const remember = (c: number, at = -1) => {
    if (c < 0) return;
    recent.push(c);
    owned.push(at >= 0 && nameAt[at]! >= 0 && POSSESSIVES.has(lower[names[nameAt[at]!]!.end + 1] ?? ""));
    if (at < 0 || inScene(at)) present.push(c);
  };
  // People named inside the quote being read and those beside it: a speaker seldom names themselves.
  let quoted: Set<number> = new Set();
  // Whom the turn right before addressed by name: "he said" in the reply is most likely them.
  let repliedTo = -1;
  // Who spoke the quote before this one, in this paragraph or an earlier one.
  let lastSpeaker = -1;
  // The last two people to speak in the exchange going on (turns with little narration between),
  // the latest last.
  const participants: number[] = [];
  // People the narration since the last turn names: who may have come in.
  const arrived: number[] = [];
  // …and those of them not named after a preposition: who came in, not who was talked of.
  const arrivedActing: number[] = [];
  /**
   * replier: whoever the next paragraph's tag names as answering this one. The paragraph's own
   * subject outranks it, but recency does not: the reply is not by the one who spoke. speaking:
   * the he/she is the speaker (not the "his" of "his wife", who may be anyone in mind). girl: the
   * tag calls her a girl ("said the girl"), which no one the book calls "Mrs." is.
   */
  // Whether the last he/she read found no one of its gender in mind but the one who spoke the
  // paragraph before, or no one of it in the exchange but him: then he goes on, and turn order
  // does not overrule it.
  let aloneInMind = false;
  // heShe: the tag is "he" or "she" itself, not a noun of that gender ("said her aunt").
  const resolvePronoun = (g: Gender | "i", avoid: number, paraSubjects: number[], { replier = -1, speaking = true, girl = false, leads = [] as number[], heShe = false } = {}): number => {
    if (g === "i") return narrator ? NARRATOR_ID : -1;
    const fits = (c: number) => genderOf(c) === g && !(girl && married(c));
    // The latest sentence of the paragraph to open on a person of that gender is about whom the
    // he/she goes on ("Fanny … Miss Crawford thought she had never seen … "My dear," said she").
    for (let k = leads.length - 1; k >= 0; k--) {
      const c = leads[k]!;
      if (fits(c) && !quoted.has(c)) return c;
    }
    // Else the first person of that gender the paragraph names, other than after a preposition, is the
    // one it is about ("Darcy … his eyes … towards Bingley … he turned and said").
    for (let k = 0; k < paraSubjects.length; k++) {
      const c = paraSubjects[k]!;
      if (fits(c) && !quoted.has(c)) return c;
    }
    if (repliedTo >= 0 && repliedTo !== avoid && repliedTo !== replier && fits(repliedTo) && !quoted.has(repliedTo) && isPerson(repliedTo)) return repliedTo;
    // After a little narration, the one person of that gender taking part in the exchange, unless
    // the narration has named someone else of that gender. Straight after a turn, turn order
    // decides among the exchange's people (the conversation decoding), and doing it here too costs
    // more than it mends.
    if (speaking && avoid < 0 && !arrived.some((c) => genderOf(c) === g && !participants.includes(c))) {
      const fit = participants.filter((c) => fits(c) && c !== replier && !quoted.has(c) && isPerson(c));
      if (fit.length === 1) return fit[0]!;
    }
    let fallback = -1;
    for (let k = recent.length - 1, seen = 0; k >= 0 && seen < SALIENCE_WINDOW; k--, seen++) {
      const c = recent[k]!;
      if (!fits(c) || !isPerson(c)) continue;
      // Someone the book never once tags by name as speaking, unless the narration since the last
      // turn brings them in ("Walter came up the path"), is a name in passing ("the book by Mr.
      // Dobson"), not whom "cried the young man" means; with no one else in mind the turn is left
      // to turn order.
      if (mute(c) && !arrivedActing.includes(c)) continue;
      if (c !== avoid && c !== replier && !quoted.has(c)) {
        // Someone outside the exchange, while the one person of that gender taking part in it spoke
        // the paragraph before ("…," said Clara. ¶ "…," said Tobias. ¶ "…," she said, with Mrs. Pell
        // named a page back): he goes on, rather than anyone recency brings back.
        if (heShe && avoid >= 0 && fits(avoid) && avoid !== replier && !quoted.has(avoid) && participants.includes(avoid) && participants.every((p) => p === avoid || genderOf(p) !== g)) {
          aloneInMind = true;
          return avoid;
        }
        return c;
      }
      if (fallback < 0) fallback = c;
    }
    aloneInMind = fallback >= 0 && fallback === avoid && fallback !== replier && !quoted.has(fallback);
    return fallback;
  };
  const resolveTag = (tag: Tag, avoid: number, paraSubjects: number[], replier = -1, leads: number[] = [], listener = -1): number => {
    if (tag.kind === "char") return tag.char;
    if (tag.kind === "pronoun") {
      if (tag.goesOn && lastSpeaker >= 0 && genderOf(lastSpeaker) === tag.gender && !quoted.has(lastSpeaker)) return lastSpeaker;
      return resolvePronoun(tag.gender, avoid, paraSubjects, { replier, girl: UNMARRIED_NOUNS.has(lower[tag.at]!), leads, heShe: pronounGender(lower[tag.at]!) === tag.gender });
    }
    // "…," cried his wife: his, most likely, who spoke the turn she answers.
    if (tag.kind === "other") return avoid >= 0 && turnBefore >= 0 && turnBefore !== avoid && !quoted.has(turnBefore) ? turnBefore : -1;
    if (tag.kind === "described") return -1;
    // "Lizzy," cried her mother: hers is first whom the turn calls by name, then who spoke before.
    const holder = listener >= 0 && genderOf(listener) === tag.possessor ? listener : avoid >= 0 && genderOf(avoid) === tag.possessor ? avoid : resolvePronoun(tag.possessor, -1, paraSubjects, { speaking: false });
    if (holder >= 0) {
      const surnames = chars[holder]!.lasts;
      const kin = chars.find((c) => c.id !== holder && c.person && c.titles.has(tag.title) && [...c.lasts].some((l) => surnames.has(l)));
      if (kin) return kin.id;
    }
    // A holder known by a given name alone ("Kitty"): her mother is the "Mrs." lately in mind.
    for (let k = recent.length - 1, seen = 0; k >= 0 && seen < SALIENCE_WINDOW; k--, seen++) {
      const c = recent[k]!;
      if (c !== holder && isPerson(c) && chars[c]!.titles.has(tag.title) && genderOf(c) === tag.gender && !quoted.has(c)) return c;
    }
    return resolvePronoun(tag.gender, avoid, paraSubjects, { replier });
  };

  const units = turnsOf(quotes);

  // The people named in the narration from lo to hi; `at` the token of each, `subjects` those not
  // named after a preposition.
  const mentionsIn = (lo: number, hi: number, out: number[], subjects?: number[], at?: number[], leads?: number[]) => {
    for (let i = lo; i <= hi; i++) {
      if (inQuote[i]) continue;
      const k = nameAt[i]!;
      const c = k >= 0 ? names[k]!.char : narrator && FIRST_PERSON.has(lower[i]!) ? NARRATOR_ID : -1;
      if (c < 0) continue;
      out.push(c);
      const subject = !PREPOSITIONS.has(lower[i - 1] ?? "");
      at?.push(i);
      if (subjects && subject) subjects.push(c);
      if (leads && k >= 0 && tok.inSentence[i] === 0 && !POSSESSIVES.has(lower[names[k]!.end + 1] ?? "")) leads.push(c);
    }
  };

  // The last person of gender g in the salience window not named as an owner, else the last at all:
  // whom a he/she in narration goes on about ("re-perusing Jane's last letter … she said").
  const lastOfGender = (g: Gender, owner = false): number => {
    for (let k = recent.length - 1, seen = 0; k >= 0 && seen < SALIENCE_WINDOW; k--, seen++) {
      const c = recent[k]!;
      if (genderOf(c) === g && isPerson(c) && (owner || !owned[k])) return c;
      // Not past someone whose gender is not known: it may be them the pronoun means.
      if (genderOf(c) === undefined && isPerson(c)) return -1;
    }
    return owner ? -1 : lastOfGender(g, true);
  };
  // Narration between turns: the people it names, and whoever its subject he/she goes on about, so
  // a chapter that names its lead once and then says "he" keeps them salient.
  const rememberNarration = (lo: number, hi: number) => {
    for (let i = lo; i <= hi; i++) {
      if (inQuote[i]) continue;
      const k = nameAt[i]!;
      if (k >= 0) {
        remember(names[k]!.char, i);
        arrived.push(names[k]!.char);
        if (inScene(i)) arrivedActing.push(names[k]!.char);
      } else if (narrator && FIRST_PERSON.has(lower[i]!)) remember(NARRATOR_ID);
      else {
        const g = pronounGender(lower[i]!);
        if (g === "m" || g === "f") remember(lastOfGender(g));
      }
    }
  };

  let nextPara = 0;
  let prevUnitSpeaker = -1;
  let prevUnitPara = -2;
  // Where the last quote of the turn before ended.
  let lastQuoteEnd = -1;
  let turnBefore = -1;
  // Whether the last turn asked the listener's name.
  let askedName = false;
  let prevUnitAddressee = -1;
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
    if (nextPara < u.para) rememberNarration(tok.paragraphStarts[nextPara]!, paraStart - 1);
    nextPara = u.para + 1;
    // A new paragraph of dialogue is a new speaker; after a narration paragraph anyone may go on.
    const avoid = u.para - prevUnitPara === 1 ? prevUnitSpeaker : -1;
    repliedTo = u.para - prevUnitPara === 1 ? prevUnitAddressee : -1;
    const beat = u.para - prevUnitPara === 2 ? beatSubject(narration, u.para - 1, [prevUnitSpeaker, turnBefore], genderOf) : -1;
    if (prevUnitPara < 0 || paraStart - tok.paragraphStarts[prevUnitPara + 1]! > EXCHANGE_GAP_TOKENS) participants.length = 0;
    const paraMentions: number[] = [];
    const paraAt: number[] = [];
    // Those of them not after a preposition ("towards Bingley", "with Jane"): who the paragraph is about.
    const paraSubjects: number[] = [];
    // Those of them that open a sentence ("Miss Crawford thought …"): the latest of a he/she's gender is whom it goes on about.
    const paraLeads: number[] = [];
    let cursor = paraStart;
    let lead: Tag | undefined;
    lastSpeaker = prevUnitSpeaker;
    const said = turnNames(tok, names, quotes, u.qs, askedName && u.para - prevUnitPara === 1, isPerson, (m) => calledBearer(m, chars, present));
    said.addressed.forEach((m, k) => (addressee[u.qs[k]!] = m));
    u.named = new Set(said.named.flat());
    ({ listener: u.listenerGender, speaker: u.speakerGender } = turnGenders(tok, quotes, u.qs));
    askedName = asksName(tok, quotes, u.qs);
    for (let idx = 0; idx < u.qs.length; idx++) {
      const qk = u.qs[idx]!;
      const q = quotes[qk]!;
      const nextStart = idx + 1 < u.qs.length ? quotes[u.qs[idx + 1]!]!.start - 1 : paraEnd;
      mentionsIn(cursor, q.start - 1, paraMentions, paraSubjects, paraAt, paraLeads);
      const from = idx === 0 && q.start === paraStart ? leadIn(narration, u.para) : -1;
      // Whom a tag's quote and the quotes beside it name: further on in a long paragraph a quote may
      // be someone else's, or a letter read out, that names the speaker.
      quoted = new Set(said.named.slice(Math.max(0, idx - 1), idx + 2).flat());
      const tag = from >= 0 ? tagOf(qk, from, nextStart) : tagOf(qk, cursor, nextStart);
      if (from >= 0 && tag) mentionsIn(from, q.start - 1, [], paraSubjects, undefined, paraLeads);
      if (!tag && idx === 0 && q.start > cursor) lead = leadSubject(cursor, q.start - 1);
      if (tag) {
        // "said the girl": turn order may overrule whom she was read as, but not to give the turn to a "Mrs.".
        if (tag.kind === "pronoun" && UNMARRIED_NOUNS.has(lower[tag.at]!)) u.ruledOut ??= married;
        aloneInMind = false;
        const c = resolveTag(tag, avoid, paraSubjects, replier, paraLeads, addressee[qk]!);
        if (c >= 0) {
          speaker[qk] = c;
          // A he/she tag read from whoever was named last is a guess turn order may overrule; one
          // read from the person the paragraph is about, or from the only one of its gender in
          // mind, or a tag that names, is not.
          if (tag.kind === "pronoun" && tag.gender !== "i" && !paraSubjects.includes(c) && !aloneInMind) {
            u.guessed ??= { gender: tag.gender, speaker: c };
            // "…," she added: read as who spoke the turn before, which turn order should not hold against it.
            if (idx === 0 && tag.goesOn && c === prevUnitSpeaker) u.goesOn = true;
          }
          // "said the other" reads who spoke two turns before: a guess too, but a sure gender.
          else if (tag.kind === "other" && genderOf(c)) u.guessed ??= { gender: genderOf(c)!, speaker: c };
          else u.certain = true;
          if (tag.kind === "char") {
            voiced.add(c);
            mentionStart[qk] = tag.start;
            mentionEnd[qk] = tag.end;
          } else {
            mentionStart[qk] = tag.at;
            mentionEnd[qk] = tag.at;
          }
        } else if ((tag.kind === "pronoun" || tag.kind === "relation") && tag.gender !== "i") {
          // "she replied" with no woman in mind still rules out every man turn order might choose.
          u.guessed ??= { gender: tag.gender, speaker: -1 };
        } else if (tag.kind === "described" && narrator) {
          // "snarled the ex-convict": whoever it is, not the "I" who tells the story.
          u.ruledOut = (c) => c === NARRATOR_ID;
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
    if (unitSpeaker < 0 && said.self >= 0) unitSpeaker = said.self;
    quoted = u.named;
    if (unitSpeaker < 0 && lead) {
      unitSpeaker = resolveTag(lead, avoid, [], replier);
    }
    if (unitSpeaker < 0 && u.continuation) unitSpeaker = prevUnitSpeaker;
    u.speaker = unitSpeaker;
    u.addressee = spokenTo(narration, u.qs.map((qk) => ({ end: quotes[qk]!.end, called: addressee[qk]! })), paraStart, paraEnd);
    // A turn right after someone's action answers them ("He shook his head laughing." / "Have I
    // said anything funny?"): it is said to them, so by someone else, and they reply next.
    if (u.addressee < 0 && beat >= 0 && beat !== u.speaker) u.addressee = beat;
    if (u.speaker >= 0 && u.speaker === u.addressee) u.speaker = -1;
    if (u.speaker < 0) for (const c of facedIn(narration, paraStart, paraEnd)) u.named.add(c);
    // The narration before the first quote and after the last is read like a narration paragraph,
    // its he/she keeping in mind whom it goes on about; between the quotes only names count.
    rememberNarration(paraStart, quotes[u.qs[0]!]!.start - 1);
    paraMentions.forEach((c, k) => { if (paraAt[k]! > quotes[u.qs[0]!]!.start) remember(c, paraAt[k]); });
    if (u.speaker >= 0) remember(u.speaker);
    rememberNarration(cursor, paraEnd);
    u.recentAt = present.length;
    // Narration after the last turn's quote and before this one's ("He tittered brutally." / "His beauty's gone…").
    if (prevUnitPara === u.para - 1) u.narration = quotes[u.qs[0]!]!.start - paraStart + Math.max(0, paraStart - 1 - lastQuoteEnd);
    turnBefore = prevUnitSpeaker;
    const spoke = u.speaker >= 0 ? u.speaker : prior ? prior[u.qs[0]!]! : -1;
    if (spoke >= 0) {
      if (participants.includes(spoke)) participants.splice(participants.indexOf(spoke), 1);
      participants.push(spoke);
      if (participants.length > 2) participants.shift();
    }
    arrived.length = 0;
    arrivedActing.length = 0;
    prevUnitAddressee = u.addressee;
    prevUnitSpeaker = u.speaker;
    prevUnitPara = u.para;
    lastQuoteEnd = quotes[u.qs[u.qs.length - 1]!]!.end;
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
    decodeConversation(units.slice(from, k), present, isPerson, genderOf);
    from = k;
  }

  for (const u of units) {
    for (const qk of u.qs) {
      if (u.guessed && !u.certain && speaker[qk] === u.guessed.speaker) speaker[qk] = u.speaker;
      if (speaker[qk]! < 0) speaker[qk] = u.speaker;
      if (addressee[qk]! < 0) addressee[qk] = u.addressee;
    }
  }
  return { speaker, mentionStart, mentionEnd, addressee, voiced };
}
