import type { Language } from "../../common/contract/rows.ts";

/**
 * Which script a book is written in, to check the language it was registered with. The pipeline
 * picks its engine by language: the NLP engine reads English (Latin script) and finds nothing in
 * Urdu, while LLM discovery reads any language. A book registered as English whose text is in
 * Arabic script (Urdu) would come out with no characters and no hint why.
 *
 * Pure: no I/O.
 */

export type Script = "latin" | "arabic" | "mixed" | "unknown";

/** Letters counted, in evenly spaced windows over the text: enough to tell, cheap on a 50 MB book. */
export const DEFAULT_SCRIPT_SAMPLE_CHARS = 50_000;
const SAMPLE_WINDOWS = 10;
/** A script is the text's when this share of its Latin and Arabic letters are in it. */
export const DEFAULT_SCRIPT_MAJORITY = 0.8;
/** Fewer letters than this tell nothing. */
const MIN_LETTERS = 20;

export interface ScriptCount {
  script: Script;
  latin: number;
  arabic: number;
}

/** Evenly spaced windows of a long text, `chars` in all: the whole of a short one. */
export function sampleText(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const window = Math.floor(chars / SAMPLE_WINDOWS);
  const step = (text.length - window) / (SAMPLE_WINDOWS - 1);
  return Array.from({ length: SAMPLE_WINDOWS }, (_, i) => text.slice(Math.floor(i * step), Math.floor(i * step) + window)).join("\n");
}

export function detectScript(text: string, sampleChars: number = DEFAULT_SCRIPT_SAMPLE_CHARS): ScriptCount {
  const part = sampleText(text, sampleChars);
  const latin = part.match(/\p{Script=Latin}/gu)?.length ?? 0;
  const arabic = part.match(/\p{Script=Arabic}/gu)?.length ?? 0;
  const total = latin + arabic;
  const script: Script =
    total < MIN_LETTERS ? "unknown" : latin / total >= DEFAULT_SCRIPT_MAJORITY ? "latin" : arabic / total >= DEFAULT_SCRIPT_MAJORITY ? "arabic" : "mixed";
  return { script, latin, arabic };
}

export interface LanguageFit {
  /** The language the pipeline proceeds with. */
  language: Language;
  /** Set when the text disagrees with the registered language: what to tell the operator. */
  mismatch?: string;
}

/**
 * The registered language, unless the text's script contradicts it. `both` is never contradicted:
 * it says the book mixes the two.
 */
export function fitLanguage(registered: Language, script: Script): LanguageFit {
  if (registered === "English" && script === "arabic") {
    return { language: "Urdu", mismatch: "the book is registered as English but its text is in Arabic script: its characters are found as for an Urdu book" };
  }
  if (registered === "Urdu" && script === "latin") {
    return { language: "English", mismatch: "the book is registered as Urdu but its text is in Latin script: its characters are found as for an English book" };
  }
  return { language: registered };
}

/** A language as typed on a command line, in any case, as the stored value (`urdu` → `Urdu`). */
export function parseLanguage(value: string, languages: readonly Language[]): Language | undefined {
  return languages.find((l) => l.toLowerCase() === value.trim().toLowerCase());
}
