// Rule-based part-of-speech tags and lemmas for the .tokens file. They approximate spaCy's output
// (which BookNLP writes) well enough for readers of that file: closed-class words come from lists,
// open-class words from suffixes and capitalisation.

import { PREPOSITIONS } from "./lexicon.ts";

export interface Tagged {
  pos: string;
  tag: string;
  lemma: string;
}

const CLOSED: Record<string, [string, string]> = {};
const put = (ws: string, pos: string, tag: string) => {
  for (const w of ws.split(" ")) CLOSED[w] = [pos, tag];
};
put("the a an this that these those every each no some any another either neither", "DET", "DT");
put([...PREPOSITIONS].join(" "), "ADP", "IN");
put("and or but nor yet", "CCONJ", "CC");
put("if because though although while whereas unless whether than so", "SCONJ", "IN");
put("i you he she it we they me him us them myself yourself himself herself itself ourselves themselves one", "PRON", "PRP");
put("my your his its our their", "PRON", "PRP$");
put("her", "PRON", "PRP$");
put("mine yours hers ours theirs", "PRON", "PRP");
put("who whom what which whose", "PRON", "WP");
put("when where why how", "ADV", "WRB");
put("can could may might must shall should will would 'll 'd", "AUX", "MD");
put("not n't never", "PART", "RB");
put("very too also just only even still quite rather almost now then here there always often soon again ever", "ADV", "RB");
put("is 's are 're am 'm", "AUX", "VBZ");
put("was were", "AUX", "VBD");
put("be", "AUX", "VB");
put("been", "AUX", "VBN");
put("being", "AUX", "VBG");
put("have 've", "AUX", "VBP");
put("has", "AUX", "VBZ");
put("had", "AUX", "VBD");
put("do", "AUX", "VBP");
put("does", "AUX", "VBZ");
put("did", "AUX", "VBD");
put("oh ah alas yes no well", "INTJ", "UH");

const IRREGULAR_LEMMAS: Record<string, string> = {
  is: "be", are: "be", am: "be", was: "be", were: "be", been: "be", "'s": "be", "'re": "be", "'m": "be",
  has: "have", had: "have", "'ve": "have", does: "do", did: "do", "n't": "not", "'ll": "will", "'d": "would",
  said: "say", went: "go", gone: "go", came: "come", saw: "see", seen: "see", took: "take", taken: "take",
  made: "make", knew: "know", known: "know", thought: "think", told: "tell", found: "find", gave: "give",
  given: "give", got: "get", felt: "feel", left: "leave", heard: "hear", began: "begin", begun: "begin",
  stood: "stand", sat: "sit", ran: "run", spoke: "speak", spoken: "speak", wrote: "write", written: "write",
  brought: "bring", kept: "keep", held: "hold", meant: "mean", met: "meet", lay: "lie", became: "become",
  men: "man", women: "woman", children: "child", me: "I", him: "he", her: "she", us: "we", them: "they",
};

const PUNCT = /^[^\p{L}\p{N}]+$/u;
const NUMBER = /^\p{N}+([.,]\p{N}+)*$/u;

export function tagToken(w: string, sentenceInitial: boolean): Tagged {
  const lc = w.toLowerCase();
  if (PUNCT.test(w)) return { pos: "PUNCT", tag: /^["\u201c\u201d'\u2018\u2019]$/.test(w) ? "``" : w.length === 1 ? w : ":", lemma: w };
  if (NUMBER.test(w)) return { pos: "NUM", tag: "CD", lemma: w };
  const closed = CLOSED[lc];
  const lemma = IRREGULAR_LEMMAS[lc] ?? lc;
  if (closed) return { pos: closed[0], tag: closed[1], lemma };
  if (!sentenceInitial && w !== lc) return { pos: "PROPN", tag: "NNP", lemma: w };
  if (lc.endsWith("ly")) return { pos: "ADV", tag: "RB", lemma };
  if (lc.endsWith("ing")) return { pos: "VERB", tag: "VBG", lemma: IRREGULAR_LEMMAS[lc] ?? lc.slice(0, -3) };
  if (lc.endsWith("ed")) return { pos: "VERB", tag: "VBD", lemma: IRREGULAR_LEMMAS[lc] ?? lc.replace(/e?d$/, "") };
  if (IRREGULAR_LEMMAS[lc]) return { pos: "VERB", tag: "VBD", lemma };
  if (/(ous|ful|ive|able|ible|al|ish|less|ic)$/.test(lc)) return { pos: "ADJ", tag: "JJ", lemma };
  if (lc.length > 3 && /[^s]s$/.test(lc)) return { pos: "NOUN", tag: "NNS", lemma: lc.slice(0, -1) };
  return { pos: "NOUN", tag: "NN", lemma };
}

/** Verb and auxiliary tags: sentence roots in .tokens, agents and patients in .book. */
export function isVerbLike(tag: string): boolean {
  return tag.startsWith("VB") || tag === "MD";
}
