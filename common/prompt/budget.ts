/**
 * Token budgets for what a chat turn sends to the model. Rows the frontend writes (a persona, a
 * preference summary, a stored message, a summary) have no size limit, so every part of every prompt
 * gets a share of a configured context size and is cut to it in the prompt, never in the database.
 * Pure: no I/O (gpt-tokenizer only).
 *
 * Counting is cheap on the chat path, in three steps:
 * 1. A text longer than MAX_CHARS_PER_TOKEN characters per budget token is cut by characters first:
 *    a 1 MB message is never tokenised.
 * 2. Its UTF-8 byte length bounds its o200k_base token count from above (every token covers at least
 *    one byte): a text within the budget in bytes fits without counting. Most parts stop here.
 * 3. Only what is near its budget is counted exactly, and the count is remembered (the persona, the
 *    passages and the history come back turn after turn). Runs without whitespace are counted in
 *    slices of COUNT_RUN_CHARS characters: byte-pair encoding costs the square of a run's length, and
 *    a 30,000-character run counted whole takes seconds. Slicing a run can only add a token per cut.
 */
import { DEFAULT_CHAT_CONTEXT_TOKENS, DEFAULT_CHAT_REPLY_TOKENS, PROMPT_FRAMING_TOKENS } from "../config-defaults.ts";
import { countO200kTokens } from "../token-count.ts";

/** Shares of what is left of the context after the reply and the framing. */
export const PROMPT_SHARES = {
  persona: 0.15,
  preferences: 0.05,
  passages: 0.3,
  summary: 0.05,
  history: 0.35,
  userMessage: 0.1,
} as const;
/** The most of the history budget one message may take, so that one huge message cannot crowd out the rest. */
export const HISTORY_MESSAGE_SHARE = 0.25;
/** A passage or message with less room than this left is dropped rather than cut to a stub. */
export const MIN_PART_TOKENS = 32;
/** Past this many characters per budget token a text is cut before it is counted (English runs at ~4.5). */
export const MAX_CHARS_PER_TOKEN = 12;
/** Runs of non-whitespace longer than this are counted in slices of this length. */
export const COUNT_RUN_CHARS = 128;
/** Characters of counted texts remembered with their counts (about twice that in bytes). */
export const DEFAULT_TOKEN_MEMO_CHARS = 2_000_000;
/** Texts shorter than this are counted afresh: remembering them costs more than counting them. */
const MEMO_MIN_CHARS = 256;
/** Ends a text that was cut, so that the model (and a reader of the request) can tell. */
export const TRIM_MARKER = " […]";

export type PromptPart = "persona" | "preferences" | "passages" | "summary" | "history" | "user_message";
/** Which request a prompt is for, as llm_tokens_total names them. */
export type PromptPurpose = "chat" | "rewrite" | "summary";

export interface PromptBudget {
  contextTokens: number;
  replyTokens: number;
  persona: number;
  preferences: number;
  passages: number;
  summary: number;
  history: number;
  /** The most one history message may take. */
  historyMessage: number;
  userMessage: number;
}

export function promptBudget(contextTokens: number = DEFAULT_CHAT_CONTEXT_TOKENS, replyTokens: number = DEFAULT_CHAT_REPLY_TOKENS): PromptBudget {
  const rest = Math.max(0, contextTokens - replyTokens - PROMPT_FRAMING_TOKENS);
  const share = (fraction: number) => Math.floor(rest * fraction);
  const history = share(PROMPT_SHARES.history);
  return {
    contextTokens,
    replyTokens,
    persona: share(PROMPT_SHARES.persona),
    preferences: share(PROMPT_SHARES.preferences),
    passages: share(PROMPT_SHARES.passages),
    summary: share(PROMPT_SHARES.summary),
    history,
    historyMessage: Math.floor(history * HISTORY_MESSAGE_SHARE),
    userMessage: share(PROMPT_SHARES.userMessage),
  };
}

/** One part cut (or messages and passages dropped) to fit its budget: logged and counted by the caller. */
export interface PromptTrim {
  purpose: PromptPurpose;
  part: PromptPart;
  /** Characters of the part before and after (for history and passages: all of them together). */
  chars: number;
  keptChars: number;
  budgetTokens: number;
  /** Messages or passages left out whole. */
  dropped?: number;
}

export interface TokenCounter {
  /** o200k_base tokens of `text`, never fewer than an exact count (runs are counted in slices). */
  count(text: string): number;
}

export interface TokenCounterOptions {
  memoChars?: number;
}

export function createTokenCounter(options: TokenCounterOptions = {}): TokenCounter {
  const memoChars = options.memoChars ?? DEFAULT_TOKEN_MEMO_CHARS;
  // Insertion order is recency: a hit is moved to the end, the oldest are evicted first.
  const memo = new Map<string, number>();
  let held = 0;
  return {
    count(text) {
      if (text.length < MEMO_MIN_CHARS) return countSliced(text);
      const known = memo.get(text);
      if (known !== undefined) {
        memo.delete(text);
        memo.set(text, known);
        return known;
      }
      const tokens = countSliced(text);
      if (text.length <= memoChars) {
        memo.set(text, tokens);
        held += text.length;
        for (const oldest of memo.keys()) {
          if (held <= memoChars) break;
          memo.delete(oldest);
          held -= oldest.length;
        }
      }
      return tokens;
    },
  };
}

const LONG_RUN = new RegExp(`\\S{${COUNT_RUN_CHARS + 1},}`, "g");

function countSliced(text: string): number {
  let tokens = 0;
  let start = 0;
  for (const run of text.matchAll(LONG_RUN)) {
    if (run.index > start) tokens += countO200kTokens(text.slice(start, run.index));
    const end = run.index + run[0].length;
    for (let at = run.index; at < end; ) {
      const to = codePointBoundary(text, Math.min(end, at + COUNT_RUN_CHARS));
      tokens += countO200kTokens(text.slice(at, to));
      at = to;
    }
    start = end;
  }
  if (start < text.length) tokens += countO200kTokens(text.slice(start));
  return tokens;
}

/** `i`, or one less when `i` would split a surrogate pair. */
function codePointBoundary(text: string, i: number): number {
  if (i <= 0 || i >= text.length) return Math.max(0, Math.min(i, text.length));
  const code = text.charCodeAt(i);
  return code >= 0xdc00 && code <= 0xdfff ? i - 1 : i;
}

/** The first `chars` characters, never half a surrogate pair. */
export function cutChars(text: string, chars: number): string {
  return chars >= text.length ? text : text.slice(0, codePointBoundary(text, chars));
}

/** The UTF-8 length of `text` (an upper bound on its tokens), or `limit + 1` once past `limit`. */
function bytesUpTo(text: string, limit: number): number {
  if (text.length > limit) return limit + 1;
  let total = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    total += code < 0x80 ? 1 : code < 0x800 ? 2 : code >= 0xd800 && code <= 0xdbff ? (i++, 4) : 3;
    if (total > limit) return limit + 1;
  }
  return total;
}

const withinBytes = (text: string, bytes: number) => text.length * 3 <= bytes || bytesUpTo(text, bytes) <= bytes;

/** Whether texts fit `each` tokens apiece and `total` together by their bytes alone: then nothing needs counting. */
export function fitUncounted(texts: readonly string[], each: number, total: number): boolean {
  let left = total;
  for (const text of texts) {
    const bytes = bytesUpTo(text, Math.min(each, left));
    if (bytes > each || bytes > left) return false;
    left -= bytes;
  }
  return true;
}

const MARKER_TOKENS = countO200kTokens(TRIM_MARKER);
/** Each cut aims this far under the budget, so that one count usually confirms it. */
const CUT_MARGIN = 0.97;

export interface Fitted {
  text: string;
  /** At least the text's tokens: exact when counted, its bytes when it fitted without counting. */
  tokens: number;
  trimmed: boolean;
}

/**
 * `text` within `budget` tokens: unchanged when it fits, else its beginning ending in TRIM_MARKER.
 * `exact`: count rather than take the byte bound, for callers that spend what is left over on other texts.
 */
export function fitTokens(text: string, budget: number, counter: TokenCounter, exact = false): Fitted {
  if (budget <= MARKER_TOKENS) return text === "" ? { text, tokens: 0, trimmed: false } : { text: "", tokens: 0, trimmed: true };
  let cut = cutChars(text, budget * MAX_CHARS_PER_TOKEN);
  if (cut === text) {
    if (!exact && withinBytes(text, budget)) return { text, tokens: budget, trimmed: false };
    const tokens = counter.count(text);
    if (tokens <= budget) return { text, tokens, trimmed: false };
  }
  const room = budget - MARKER_TOKENS;
  let tokens = counter.count(cut);
  while (tokens > room) {
    cut = cutChars(cut, Math.floor((cut.length * room * CUT_MARGIN) / tokens));
    tokens = counter.count(cut);
  }
  cut = cut.trimEnd();
  return { text: cut + TRIM_MARKER, tokens: tokens + MARKER_TOKENS, trimmed: true };
}

export interface PromptLimits {
  budget: PromptBudget;
  counter: TokenCounter;
  /** Told of every part that was cut or left out. */
  onTrim?: (trim: PromptTrim) => void;
}

export const DEFAULT_PROMPT_LIMITS: PromptLimits = { budget: promptBudget(), counter: createTokenCounter() };

/** Cuts one part of a prompt to its budget and reports the cut. */
export function fitter(limits: PromptLimits, purpose: PromptPurpose) {
  return (part: PromptPart, text: string, budgetTokens: number): string => {
    const fitted = fitTokens(text, budgetTokens, limits.counter);
    if (fitted.trimmed) limits.onTrim?.({ purpose, part, chars: text.length, keptChars: fitted.text.length, budgetTokens });
    return fitted.text;
  };
}
