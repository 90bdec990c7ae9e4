// How a character is presented in lists: a stable color and emoji, and a one-line description.

import type { CharacterProfile } from "../../common/llm/prompt-format.ts";
import { fnv1a } from "../../common/hash.ts";
import { nameKey } from "./character-names.ts";
import { clip } from "./character-lines.ts";

/** Readable on light and dark backgrounds alike. */
const PALETTE = [
  "#E57373", "#F06292", "#BA68C8", "#9575CD", "#7986CB", "#64B5F6", "#4FC3F7", "#4DD0E1",
  "#4DB6AC", "#81C784", "#AED581", "#DCE775", "#FFD54F", "#FFB74D", "#FF8A65", "#A1887F",
];
const EMOJI = ["🎭", "📜", "🕯️", "🗝️", "🌹", "⚔️", "🎩", "🪶", "🌙", "🔥", "🍂", "🦋", "🐚", "🧭", "🎻", "👑", "🌿", "💎", "🏰", "🕊️"];

/** The same name always gets the same color and emoji, in every run and on every machine. */
export function characterStyle(name: string): { color: string; emoji: string } {
  const h = fnv1a(nameKey(name));
  return { color: PALETTE[h % PALETTE.length]!, emoji: EMOJI[Math.floor(h / PALETTE.length) % EMOJI.length]! };
}

export const MAX_DESCRIPTION_CHARS = 280;

/** The one-line description shown in a character list: the opening of the profile's psychology. */
export function listDescription(profile: CharacterProfile): string {
  const text = profile.psychology.replace(/\s+/g, " ").trim();
  const sentences = text.match(/[^.!?…۔؟]+[.!?…۔؟]*/gu) ?? [text];
  let description = "";
  for (const s of sentences) {
    if (description && (description + s).length > MAX_DESCRIPTION_CHARS) break;
    description += s;
  }
  return clip(description.trim(), MAX_DESCRIPTION_CHARS);
}
