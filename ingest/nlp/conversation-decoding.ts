import type { Gender } from "./lexicon.ts";
import type { Quote } from "./quotes.ts";

// How many mentions back a he/she or an untagged turn looks for its speaker. Twenty is best on the
// ten studied dev novels (40 and 10 are each about 0.2 point lower): someone last named further
// back than that is seldom the one speaking.
export const SALIENCE_WINDOW = 20;

/** The quotes of one paragraph: one turn of a conversation. */
export interface Unit {
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
  /** Gender of the speaker, from the turn's own words ("my husband"). */
  speakerGender?: Gender;
  /** A he/she tag resolved by recency alone: its gender is sure, the person is not. */
  guessed?: { gender: Gender; speaker: number };
  /** Tokens of narration between the quotes of the turn before and this turn's first quote, in the two paragraphs. */
  narration?: number;
  /** A he/she tag that carries on a speech ("she added", "he continued"), read as whoever spoke the turn before. */
  goesOn?: boolean;
  /** A tag settled who speaks (a name, or the person the paragraph is about). */
  certain?: boolean;
  /** Those a tag says this turn is not by ("said the detective" is not the narrator, "said the girl" no "Mrs."). */
  ruledOut?: (c: number) => boolean;
}

/** The quotes grouped by paragraph, in order: the turns the reading and the decoding go through, none settled yet. */
export function turnsOf(quotes: readonly Quote[]): Unit[] {
  const units: Unit[] = [];
  quotes.forEach((q, k) => {
    const last = units[units.length - 1];
    if (last && last.para === q.paragraph) last.qs.push(k);
    else units.push({ para: q.paragraph, qs: [k], speaker: -1, addressee: -1, continuation: q.continuation, recentAt: 0, named: new Set(), listenerGender: undefined });
  });
  return units;
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
// After this much narration between two turns the same person speaking again is no longer
// unlikely: the narration tells what they did, and they go on ("He tittered brutally." / "His
// beauty's gone…").
const TOLD_BETWEEN_TOKENS = 20;
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
export function decodeConversation(conv: Unit[], recent: number[], isPerson: (c: number) => boolean, genderOf: (c: number) => Gender | undefined): void {
  const open = conv.map((u) => u.speaker < 0 || (u.guessed !== undefined && !u.certain && u.speaker === u.guessed.speaker));
  if (!open.includes(true)) return;
  const cand: number[] = [];
  const add = (c: number) => {
    if (c >= 0 && !cand.includes(c)) cand.push(c);
  };
  for (const u of conv) add(u.speaker);
  for (const u of conv) if (isPerson(u.addressee)) add(u.addressee);
  // When the turns fixed by their tags are by two people or more, the exchange is theirs: the
  // others lately named may be present, but they are silent, and an open turn goes to someone a tag
  // names (a he/she's guess among them) or a turn addresses. Unless the turn's own cues rule all of
  // those out (a "sir" for a man when they are women), or its tag describes someone unnamed ("snarled
  // the old convict").
  const fixed = new Set<number>();
  conv.forEach((u, k) => {
    if (!open[k]) fixed.add(u.speaker);
  });
  const exchangeNamed = fixed.size >= 2;
  const named = cand.length;
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
    // "Yes, sir," in the reply, which names no one: the one it answers, who spoke this turn, is a
    // man (on the ten studied novels the gender fits the turn's speaker in 80 of 84 such turns).
    const answered = n1 && !n1.continuation && n1.addressee < 0 ? n1.listenerGender : undefined;
    // How many of the genders the turns around say this one's speaker has `c` contradicts.
    const misfits = (c: number, genders: readonly (Gender | undefined)[]) => genders.filter((g) => g !== undefined && genderOf(c) !== undefined && genderOf(c) !== g).length;
    const unfit = (c: number) => misfits(c, [heard, answered]) > 0;
    // Whether someone the tags name or a turn addresses fits this turn.
    let namedFits = false;
    for (let j = 0; j < m; j++) {
      const c = cand[j]!;
      if (!open[k]) {
        e[j] = c === u.speaker ? 0 : IMPOSSIBLE;
        continue;
      }
      // Speaking to oneself, or a "she" who is a man, is all but ruled out; only all but, so a run
      // always has some reading.
      let s = c === u.addressee || u.ruledOut?.(c) || (u.guessed && genderOf(c) !== u.guessed.gender) ? SCORE_RULED_OUT : 0;
      if (c === u.guessed?.speaker) s += SCORE_GUESSED_TAG;
      if (rank[j]! >= 0) s += SCORE_SALIENCE / (1 + rank[j]!);
      if (u.named.has(c)) s += SCORE_NAMED_IN_TURN;
      if (n1 && !n1.continuation && n1.addressee === c) s += SCORE_REPLY_NAMES;
      // "My husband has gone out" is a woman's turn, whichever woman: so 23 of the 24 such quotes of the ten studied novels.
      s += SCORE_LISTENER_GENDER * misfits(c, [heard, answered, u.speakerGender]);
      e[j] = s;
      if (j < named && s > SCORE_RULED_OUT / 2 && !unfit(c)) namedFits = true;
    }
    if (open[k] && exchangeNamed && namedFits && !u.ruledOut) for (let j = named; j < m; j++) e[j] = IMPOSSIBLE;
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
          if (c === b) t += (u.narration ?? 0) >= TOLD_BETWEEN_TOKENS || u.goesOn ? 0 : SCORE_SAME_TWICE;
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
