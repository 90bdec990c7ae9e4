// Characters found by the LLM (books BookNLP cannot read): the answers of every discovery call
// merged into one list. Pure: no I/O.

import type { Discovery } from "../../common/llm/prompt-format.ts";
import {
  countShared,
  DEFAULT_CHARACTER_CAP,
  importanceOf,
  MAX_COOCCURRING,
  MAX_DISCOVERY_PASSAGE_CHARS,
  MAX_PASSAGES,
  type FoundCharacter,
  type SelectionOptions,
} from "./character-selection.ts";
import { quoteSample, spread } from "./character-lines.ts";
import { nameKey } from "./character-names.ts";
import { DEFAULT_MIN_MENTIONS } from "../nlp/character-list.ts";

export interface SampledDiscovery {
  /** The sample texts one discovery call saw. */
  samples: readonly string[];
  answer: Discovery;
}

/** Occurrences of needle in text (non-overlapping). */
function occurrences(text: string, needle: string): number {
  if (!needle) return 0;
  let n = 0;
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) n++;
  return n;
}

/**
 * Merges the characters each discovery call reported into one list: two entries are one character
 * when a name or alias of one is a name or alias of the other. Importance is how often the names
 * occur in the whole book; a character whose names never reach minMentions occurrences is dropped
 * (that also drops names the model made up). Quotes come from the model, so minQuotes is not applied.
 */
export function mergeDiscoveries(text: string, found: readonly SampledDiscovery[], options: SelectionOptions = {}): FoundCharacter[] {
  const maxCharacters = options.maxCharacters ?? DEFAULT_CHARACTER_CAP;
  const minMentions = options.minMentions ?? DEFAULT_MIN_MENTIONS;
  interface Entry {
    name: string;
    forms: string[];
    quotes: string[];
  }
  const entries: Entry[] = [];
  const byForm = new Map<string, Entry>();
  for (const { answer } of found) {
    for (const c of answer.characters) {
      const forms = [c.name, ...c.aliases].map((f) => f.normalize("NFC").replace(/\s+/g, " ").trim()).filter(Boolean);
      let entry = forms.map((f) => byForm.get(nameKey(f))).find((e) => e !== undefined);
      if (!entry) {
        entry = { name: forms[0]!, forms: [], quotes: [] };
        entries.push(entry);
      }
      for (const f of forms) {
        if (!entry.forms.some((g) => nameKey(g) === nameKey(f))) entry.forms.push(f);
        byForm.set(nameKey(f), entry);
      }
      for (const q of c.quotes) if (q.trim() && !entry.quotes.includes(q.trim())) entry.quotes.push(q.trim());
    }
  }
  // Where a character appears is read from every sample, not only from the calls that reported them.
  const allSamples = [...new Set(found.flatMap((f) => f.samples))];
  const seenIn = new Map(entries.map((e) => [e, new Set(allSamples.filter((s) => e.forms.some((f) => s.includes(f))))]));

  const counted = entries
    .map((e) => ({ e, mentions: e.forms.reduce((n, f) => n + occurrences(text, f), 0) }))
    .filter((x) => x.mentions >= minMentions)
    .sort((a, b) => importanceOf(b.mentions, b.e.quotes.length) - importanceOf(a.mentions, a.e.quotes.length))
    .slice(0, maxCharacters);

  return counted.map(({ e, mentions }) => ({
    name: e.name,
    aliases: e.forms.slice(1),
    gender: null,
    quotes: quoteSample(e.quotes),
    mentionCount: mentions,
    quoteCount: e.quotes.length,
    importance: importanceOf(mentions, e.quotes.length),
    cooccurring: counted
      .filter((o) => o.e !== e)
      .map((o) => ({ name: o.e.name, count: countShared(seenIn.get(e)!, seenIn.get(o.e)!) }))
      .filter((c) => c.count > 0)
      .sort((a, b) => b.count - a.count)
      .slice(0, MAX_COOCCURRING),
    passages: spread([...seenIn.get(e)!], MAX_PASSAGES).map((s) => passageAround(s, e.forms)),
  }));
}

/** A window of a sample centred on the first of the character's names it contains. */
function passageAround(sample: string, forms: readonly string[]): string {
  const at = Math.min(...forms.map((f) => sample.indexOf(f)).filter((i) => i >= 0));
  const start = Math.max(0, at - MAX_DISCOVERY_PASSAGE_CHARS / 2);
  return sample.slice(start, start + MAX_DISCOVERY_PASSAGE_CHARS).trim();
}
