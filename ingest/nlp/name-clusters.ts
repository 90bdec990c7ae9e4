import { anyWithin, countBelow } from "../../common/sorted.ts";
import { emptyCharacter, mergeCharacter, type Character } from "./character.ts";
import { FIRST_NAME_TITLES, GIVEN_NAMES, HONORIFICS, NICKNAMES } from "./lexicon.ts";
import { bareOwnName, compatible, eldestDaughter, familyLead, fatherOf, formGender, formKey, heroine, latecomer, OWN_NAME_MIN, particleSurname, sisters, type Form } from "./name-fit.ts";
import type { NameMention } from "./names.ts";
import { titleOf } from "./titles.ts";
import type { Tokenized } from "./tokenizer.ts";

// How many times more often a bare name must occur than all the fuller names it fits together
// before those fuller names are taken for elaborations of it.
const ELABORATION_RATIO = 4;
// How far (tokens, a few pages) "the Major" may be from the major's name to be taken for them.
const RANK_REACH = 3000;
// How far back (tokens, a few pages) the last use of a shared name still settles which person it is.
const RECENCY_REACH = 3000;
// Share of a bare name's mentions after "in"/"at"/… that marks it as a place.
const PLACE_SHARE = 0.3;
function newCharacter(id: number, f: Form): Character {
  const words = f.parts.map((p) => p.toLowerCase());
  const c = emptyCharacter(id, formGender(f.title, f.parts));
  if (f.definite) c.heads.add(words[words.length - 1]!);
  else if (particleSurname(words)) c.lasts.add(words[words.length - 1]!);
  else if (words.length >= 2) {
    c.firsts.add(words[0]!);
    c.lasts.add(words[words.length - 1]!);
  } else if (f.title !== undefined && !FIRST_NAME_TITLES.has(f.title)) c.lasts.add(words[0]!);
  else if (GIVEN_NAMES.has(words[0]!)) c.firsts.add(words[0]!);
  else {
    c.firsts.add(words[0]!);
    c.lasts.add(words[0]!);
  }
  return c;
}

/** A mention as written, words joined by single spaces. */
export function surfaceOf(tok: Tokenized, start: number, end: number): string {
  let out = tok.text[start]!;
  for (let i = start + 1; i <= end; i++) out += " " + tok.text[i]!;
  return out;
}

function absorb(c: Character, f: Form, tok: Tokenized): void {
  if (f.title !== undefined) c.titles.add(f.title);
  const g = formGender(f.title, f.parts);
  if (!c.gender && g) c.gender = g;
  for (const m of f.mentions) {
    const surface = surfaceOf(tok, m.start, m.end);
    c.forms.set(surface, (c.forms.get(surface) ?? 0) + 1);
    m.char = c.id;
    if (m.start < c.firstStart) c.firstStart = m.start;
  }
  c.mentionCount += f.mentions.length;
}

/** Most frequent candidate when it clearly dominates; undefined when the name stays ambiguous. */
function dominant(cands: Character[]): Character | undefined {
  const sorted = [...cands].sort((a, b) => b.mentionCount - a.mentionCount);
  const [top, second] = sorted;
  if (!top) return undefined;
  if (!second || top.mentionCount >= 2 * second.mentionCount) return top;
  return undefined;
}

/**
 * Groups name mentions into characters: full names first, then titled and bare forms join the one
 * character they fit ("Elizabeth" → "Elizabeth Bennet"), never across genders or across Mrs./Miss.
 * An ambiguous short form ("Miss Bennet" with two Miss Bennets) becomes a character of its own.
 */
export function clusterNames(tok: Tokenized, names: NameMention[], seed: Character[] = []): Character[] {
  const forms = new Map<string, Form>();
  for (const m of names) {
    const key = formKey(m);
    let f = forms.get(key);
    if (!f) {
      const words = m.parts.map((p) => p.toLowerCase());
      f = { key, title: m.title, parts: m.parts, words, gender: formGender(m.title, m.parts), definite: m.definite, mentions: [] };
      forms.set(key, f);
    }
    f.mentions.push(m);
  }
  const wordUses = new Map<string, number>();
  for (const f of forms.values()) for (const w of new Set(f.words)) wordUses.set(w, (wordUses.get(w) ?? 0) + f.mentions.length);
  const order = [...forms.values()].sort(
    (a, b) =>
      Number(a.definite) - Number(b.definite) ||
      b.parts.length - a.parts.length ||
      Number(b.title !== undefined) - Number(a.title !== undefined) ||
      // A familiar full name ("Tom Gradley") comes after the formal one it may be ("Thomas Gradley").
      Number(familiar(a)) - Number(familiar(b)) ||
      b.mentions.length - a.mentions.length,
  );
  const chars: Character[] = [...seed];
  const deferred = new Map<Form, Character[]>();
  const byWord = new Map<string, Character[]>();
  for (const f of order) {
    // Only characters sharing the form's first or last word can match it.
    const near = new Set([...(byWord.get(f.words[0]!) ?? []), ...(byWord.get(f.words[f.words.length - 1]!) ?? [])]);
    // A bare word mostly seen after "in"/"at" is a place that once sat next to a name ("in London Lydia").
    const placeLike = f.title === undefined && !f.definite && f.words.length === 1 && f.mentions.filter((m) => m.placeContext).length >= PLACE_SHARE * f.mentions.length;
    let cands = placeLike ? [] : [...near].filter((c) => compatible(c, f) && !fatherOf(c, f, forms));
    if (bareOwnName(f) && cands.every((c) => latecomer(c, f, wordUses))) cands = [];
    // "The Major" is the book's one major, met by name before ("Major Callendar").
    const rank = f.definite && f.words.length === 1 ? titleOf(f.parts[0]!) : undefined;
    // Only within a few pages of the major's name: "I wish to the Lord" stories away from any lord
    // is not Lord St. Simon. The mentions far from it are a character of their own.
    if (cands.length === 0 && rank !== undefined) {
      // The book's one holder of the rank: with two emperors, "the Emperor" is neither by default.
      const holders = chars.filter((c) => c.titles.has(rank) && c.mentionCount > 0);
      const holder = dominant(holders);
      const near = holder ? f.mentions.filter(nearTo(names.filter((m) => m.char === holder.id).map((m) => m.start))) : [];
      if (holder && near.length === f.mentions.length) cands.push(holder);
      else if (holder && near.length > 0) {
        absorb(holder, { ...f, mentions: near }, tok);
        f.mentions = f.mentions.filter((m) => m.char !== holder.id);
      }
    }
    // A familiar form nobody else answers to joins the one character with the full given name:
    // "Lizzy" is Elizabeth, and "Tom Gradley" the Thomas Gradley the book has named in full.
    if (cands.length === 0 && f.words.length <= 2 && !f.definite && !particleSurname(f.words)) {
      const [first, ...surname] = f.words;
      const full = (NICKNAMES.get(first!) ?? []).flatMap((n) => {
        const shadow: Form = { ...f, words: [n, ...surname] };
        // A lone familiar name only when the bare given name is used at least as often (Elizabeth, not
        // Lady Catherine); a full name has its surname for evidence.
        if (surname.length === 0 && (forms.get(n)?.mentions.length ?? 0) < f.mentions.length) return [];
        // A familiar full name is the man the book also names plainly in full ("Thomas Gradley"), not
        // one it names with a title alone ("Sir Thomas", whose son is Tom).
        if (surname.length > 0 && !forms.has([n, ...surname].join(" "))) return [];
        return (byWord.get(n) ?? []).filter((c) => c.firsts.has(n) && compatible(c, shadow));
      });
      const unique = [...new Set(full)];
      if (unique.length === 1) cands.push(unique[0]!);
    }
    let target: Character | undefined;
    if (cands.length === 1) target = cands[0];
    else if (cands.length > 1) {
      const w = f.parts[0]!.toLowerCase();
      if (f.parts.length > 1) target = dominant(cands) ?? cands.sort((a, b) => b.mentionCount - a.mentionCount)[0];
      else if (f.title === undefined) {
        const male = cands.filter((c) => c.lasts.has(w) && !c.firsts.has(w) && c.titles.has("mr"));
        // A fuller name whose given name is a name in its own right ("Natásha Pierre", "Nicholas
        // Rostóv") is someone else, not an elaboration.
        const someoneElse = (c: Character) => [...c.firsts].some((g) => g !== w && (forms.get(g)?.mentions.length ?? 0) >= OWN_NAME_MIN);
        // Nor does a given name two families' full names share: "Nicholas" does not make Nicholas
        // Rostóv and Nicholas Bolkónski one man.
        // Only surnames the book uses beyond one full name: "a Pooh Party" is no family.
        const families = new Set(cands.flatMap((c) => [...c.lasts].filter((l) => l !== w && (wordUses.get(l) ?? 0) >= 2)));
        // …nor a surname two given names share: "Kutúzov" does not make Paul and Michael Kutúzov one
        // man. A given name counts when its full name is used more than once or it is used alone:
        // "Clever Bear Pooh", once, is no Clever.
        const given = (c: Character, g: string) => g !== w && (c.mentionCount > 1 || (forms.get(g)?.mentions.length ?? 0) > 1);
        const givens = new Set(cands.flatMap((c) => [...c.firsts].filter((g) => given(c, g))));
        if (!cands.some(someoneElse) && families.size < 2 && givens.size < 2 && f.mentions.length >= ELABORATION_RATIO * cands.reduce((n, c) => n + c.mentionCount, 0)) {
          // A bare name used far more than every fuller name it fits is one character's own name, and
          // the fuller ones are occasional elaborations ("Piglet" and "Foolish Piglet", "Pooh" and
          // "Winnie-the-Pooh" and "Pooh Bear"): they are all that character.
          target = cands.reduce((a, b) => (b.mentionCount > a.mentionCount ? b : a));
          for (const other of cands) if (other !== target) mergeInto(target, other, names, byWord);
        } else if (male.length === 1 && !cands.some((c) => c.firsts.has(w))) target = male[0];
        else {
          // The bare surname of a family (two given names or more) is the member the book follows, who
          // goes by it for chapters on end: recency would hand "Rostóv" at the front to whichever
          // Rostóv was named last at home.
          target = givens.size >= 2 ? familyLead(cands, w, forms) : undefined;
          // Any other bare name shared by several characters ("Charles"): settled mention by mention below.
          if (!target) {
            deferred.set(f, cands);
            continue;
          }
        }
      } else {
        // "Miss Lydia" joins the one "Miss Lydia …" there is; a titled surname that fits several
        // people ("Miss Bennet") is a character of its own.
        const title = f.title;
        const byFirst = cands.filter((c) => c.titles.has(title) && c.firsts.has(w) && !c.lasts.has(w));
        // "Miss Miller" is the one Miller the book already calls "Miss": Daisy Miller, not her mother.
        const holders = cands.filter((c) => c.titles.has(title) && c.lasts.has(w) && !c.firsts.has(w));
        const family = title === "miss" ? sisters(cands, w, forms) : [];
        if (byFirst.length === 1) target = byFirst[0];
        else if (family.length > 1) target = eldestDaughter(family);
        else if (holders.length === 1) target = holders[0];
        else if (holders.length === 0 && title === "miss") target = heroine(cands, w, forms);
        else if (holders.length > 1 && HONORIFICS.get(title) === "m") {
          // Two brothers both "Mr. Sholto": each use is whichever of them the text was just about.
          // (Several "Miss Bennet"s are not settled so: by custom that is the eldest alone.)
          deferred.set(f, holders);
          continue;
        }
      }
    }
    if (!target) {
      target = newCharacter(chars.length, f);
      chars.push(target);
      for (const w of [...target.firsts, ...target.lasts, ...target.heads]) byWord.set(w, [...(byWord.get(w) ?? []), target]);
    }
    absorb(target, f, tok);
  }
  resolveByRecency(tok, names, deferred, chars);
  return chars;
}

function familiar(f: Form): boolean {
  return f.words.length > 1 && NICKNAMES.has(f.words[0]!);
}

/** Whether a mention is within RANK_REACH tokens of one of `starts` (ascending). */
function nearTo(starts: readonly number[]): (m: NameMention) => boolean {
  return (m) => anyWithin(starts, m.start, RANK_REACH);
}

/** mergeCharacter, and the word index of clustering pointed at `into`. */
function mergeInto(into: Character, from: Character, names: NameMention[], byWord: Map<string, Character[]>): void {
  mergeCharacter(into, from, names);
  for (const [w, list] of byWord) {
    if (!list.includes(from)) continue;
    byWord.set(w, list.includes(into) ? list.filter((c) => c !== from) : list.map((c) => (c === from ? into : c)));
  }
}

/** Each mention of an ambiguous bare name goes to the candidate mentioned most recently before it. */
function resolveByRecency(tok: Tokenized, names: NameMention[], deferred: Map<Form, Character[]>, chars: Character[]): void {
  if (deferred.size === 0) return;
  const candidatesOf = new Map<NameMention, Character[]>();
  for (const [f, cands] of deferred) for (const m of f.mentions) candidatesOf.set(m, cands);
  // A family named keeps its own member of the name in mind: after "Mrs. Musgrave", "Charles" is
  // Charles Musgrave rather than the Charles Hayward named pages before. Only surnames that tell the
  // candidates apart count (not the two Sholto brothers' one surname), and only men's: a woman's
  // surname changes when she marries, so her husband's family being named says nothing of which of
  // her names the text means.
  const family = new Map<string, Character[]>();
  for (const cands of deferred.values()) {
    for (const c of cands) {
      for (const l of c.lasts) {
        if (c.gender !== "m" || c.firsts.has(l) || cands.some((o) => o !== c && o.lasts.has(l))) continue;
        const members = family.get(l) ?? [];
        if (!members.includes(c)) family.set(l, [...members, c]);
      }
    }
  }
  // Each candidate's own mentions, in text order, for looking ahead.
  const own = new Map<number, number[]>();
  for (const cands of deferred.values()) for (const c of cands) own.set(c.id, []);
  for (const m of names) if (m.char >= 0) own.get(m.char)?.push(m.start);
  const nextOwn = (c: Character, at: number) => {
    const starts = own.get(c.id)!;
    return starts[countBelow(starts, at)] ?? Infinity;
  };
  const lastSeen = new Int32Array(chars.length).fill(-1);
  for (const m of names) {
    const cands = candidatesOf.get(m);
    if (cands) {
      let best = cands[0]!;
      for (const c of cands) {
        const better = lastSeen[c.id]! > lastSeen[best.id]! || (lastSeen[c.id] === lastSeen[best.id] && c.mentionCount > best.mentionCount);
        if (better) best = c;
      }
      // Named last pages ago, the name is more likely whoever the text is about to name in full: the
      // "Mary" of a new story is its own Mary, introduced a page later, not the last story's.
      if (lastSeen[best.id]! < 0 || m.start - lastSeen[best.id]! > RECENCY_REACH) {
        const distance = (c: Character) => Math.min(lastSeen[c.id]! < 0 ? Infinity : m.start - lastSeen[c.id]!, nextOwn(c, m.start) - m.start);
        for (const c of cands) if (distance(c) < distance(best)) best = c;
      }
      const surface = surfaceOf(tok, m.start, m.end);
      best.forms.set(surface, (best.forms.get(surface) ?? 0) + 1);
      best.mentionCount++;
      m.char = best.id;
    }
    if (m.char < 0) continue;
    lastSeen[m.char] = m.start;
    for (const l of chars[m.char]!.lasts) for (const c of family.get(l) ?? []) lastSeen[c.id] = m.start;
  }
}
