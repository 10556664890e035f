// What a model request costs in money, from per-model prices (USD per million tokens).
// Defaults are Anthropic's list prices for the models Claude Code asks for (the model pages
// on platform.claude.com, read 2026-11-25); `llm.prices` in carapace.json overrides them per
// model. Costs are kept in whole micro-dollars (µUSD), rounded up, so sums never drift.
import type { Usage } from './usage.js';

/** USD per million tokens. Cache rates left out follow Anthropic's multipliers of `input`. */
export interface Rates {
  input: number;
  output: number;
  /** Prompt-cache writes with the default 5-minute lifetime (1.25 × input). */
  cache_write_5m?: number;
  /** Prompt-cache writes with a 1-hour lifetime (2 × input). */
  cache_write_1h?: number;
  /** Prompt-cache hits (0.1 × input). */
  cache_read?: number;
}

export interface ModelPrice extends Rates {
  /** Some models cost more for every token of a request whose prompt is longer than `above_tokens`. */
  long_prompt?: Rates & { above_tokens: number };
}

export const DEFAULT_PRICES: Readonly<Record<string, ModelPrice>> = {
  'claude-opus-5-5': { input: 4, output: 20, cache_write_5m: 5, cache_write_1h: 8, cache_read: 0.2 },
  // Cache hits cut from $0.20 to $0.10 on 2026-10-07.
  'claude-sonnet-5-5': { input: 2, output: 10, cache_write_5m: 2.5, cache_write_1h: 4, cache_read: 0.1 },
  'claude-haiku-5-5': {
    input: 0.1, output: 0.5, cache_write_5m: 0.125, cache_write_1h: 0.2, cache_read: 0.01,
    long_prompt: { above_tokens: 100_000, input: 0.5, output: 2.5, cache_write_5m: 0.625, cache_write_1h: 1, cache_read: 0.05 },
  },
  'claude-haiku-4-5': { input: 1, output: 5, cache_write_5m: 1.25, cache_write_1h: 2, cache_read: 0.1 },
};

/** JSON schema of one model's price, for carapace.json. */
const rateProperties = {
  input: { type: 'number', minimum: 0 },
  output: { type: 'number', minimum: 0 },
  cache_write_5m: { type: 'number', minimum: 0 },
  cache_write_1h: { type: 'number', minimum: 0 },
  cache_read: { type: 'number', minimum: 0 },
};
export const priceSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['input', 'output'],
  properties: {
    ...rateProperties,
    long_prompt: { type: 'object', additionalProperties: false, required: ['above_tokens', 'input', 'output'], properties: { above_tokens: { type: 'integer', minimum: 1 }, ...rateProperties } },
  },
};

interface FullRates {
  input: number;
  output: number;
  write5m: number;
  write1h: number;
  read: number;
}

function full(rates: Rates): FullRates {
  return { input: rates.input, output: rates.output, write5m: rates.cache_write_5m ?? rates.input * 1.25, write1h: rates.cache_write_1h ?? rates.input * 2, read: rates.cache_read ?? rates.input * 0.1 };
}

/** The rates that apply to a request whose prompt (input, cache writes and reads) has `promptTokens`. */
function ratesFor(price: ModelPrice, promptTokens: number): FullRates {
  return price.long_prompt && promptTokens > price.long_prompt.above_tokens ? full(price.long_prompt) : full(price);
}

/**
 * What a finished request cost (tokens × USD per million = µUSD, rounded up). Cache writes the upstream did not split by lifetime are
 * priced at the dearer 1-hour rate: a budget may only err on the safe side.
 */
export function costMicros(price: ModelPrice, usage: Usage): number {
  const prompt = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
  const r = ratesFor(price, prompt);
  const split = usage.cache_creation_5m + usage.cache_creation_1h;
  const unsplit = Math.max(0, usage.cache_creation_input_tokens - split);
  return Math.ceil(
    usage.input_tokens * r.input + usage.output_tokens * r.output + usage.cache_creation_5m * r.write5m + (usage.cache_creation_1h + unsplit) * r.write1h + usage.cache_read_input_tokens * r.read,
  );
}

/** The most a request may cost: every prompt token at the dearest input rate, and all of max_tokens. */
export function worstCaseMicros(price: ModelPrice, promptTokens: number, maxTokens: number): number {
  const r = ratesFor(price, promptTokens);
  return Math.ceil(promptTokens * Math.max(r.input, r.write5m, r.write1h, r.read) + maxTokens * r.output);
}

/** "$1.23" (or "$0.0042" for sums under a cent, so a small cost does not read as nothing). */
export function usd(microsValue: number): string {
  const dollars = microsValue / 1_000_000;
  return dollars !== 0 && Math.abs(dollars) < 0.01 ? `$${dollars.toFixed(4)}` : `$${dollars.toFixed(2)}`;
}
