import { describe, expect, it } from '@jest/globals';
import { costMicros, DEFAULT_PRICES, usd, worstCaseMicros } from '../../src/llm/prices.js';
import { UsageMeter, type Usage } from '../../src/llm/usage.js';

const usage = (over: Partial<Usage>): Usage => ({ input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cache_creation_5m: 0, cache_creation_1h: 0, ...over });

describe('model prices', () => {
  it('prices each kind of token at its own rate, in µUSD', () => {
    const opus = DEFAULT_PRICES['claude-opus-5-5'];
    // 1M input $4 + 1M output $20 + 1M cache hits $0.20 + 1M 5-minute writes $5 + 1M 1-hour writes $8
    const used = usage({ input_tokens: 1e6, output_tokens: 1e6, cache_read_input_tokens: 1e6, cache_creation_input_tokens: 2e6, cache_creation_5m: 1e6, cache_creation_1h: 1e6 });
    expect(costMicros(opus, used)).toBe(37_200_000);
  });

  it('prices cache writes the upstream did not split at the dearer 1-hour rate', () => {
    expect(costMicros(DEFAULT_PRICES['claude-haiku-4-5'], usage({ cache_creation_input_tokens: 1000 }))).toBe(2000);
    expect(costMicros(DEFAULT_PRICES['claude-haiku-4-5'], usage({ cache_creation_input_tokens: 1000, cache_creation_5m: 1000 }))).toBe(1250);
  });

  it('charges a long prompt the long-prompt rates on every token, output included', () => {
    const haiku = DEFAULT_PRICES['claude-haiku-5-5'];
    expect(costMicros(haiku, usage({ input_tokens: 100_000, output_tokens: 1000 }))).toBe(100_000 * 0.1 + 1000 * 0.5);
    expect(costMicros(haiku, usage({ input_tokens: 90_000, cache_read_input_tokens: 10_001, output_tokens: 1000 }))).toBe(Math.ceil(90_000 * 0.5 + 10_001 * 0.05 + 1000 * 2.5));
  });

  it('takes the worst case at the dearest input rate and all of max_tokens, and rounds up', () => {
    expect(worstCaseMicros(DEFAULT_PRICES['claude-sonnet-5-5'], 1000, 2000)).toBe(1000 * 4 + 2000 * 10);
    expect(worstCaseMicros(DEFAULT_PRICES['claude-haiku-5-5'], 200_000, 10)).toBe(200_000 * 1 + 10 * 2.5);
    expect(costMicros({ input: 0.1, output: 0 }, usage({ input_tokens: 3 }))).toBe(1);
    // Rates left out follow Anthropic's multipliers of the input price.
    expect(worstCaseMicros({ input: 3, output: 15 }, 1000, 0)).toBe(6000);
  });

  it('reads the cache writes split by lifetime from a stream', () => {
    const meter = new UsageMeter();
    meter.push(Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,"cache_creation_input_tokens":30,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":20},"output_tokens":1}}}\n\n'));
    meter.push(Buffer.from('data: {"type":"message_delta","usage":{"output_tokens":9}}\n'));
    expect(meter.end()).toMatchObject({ input_tokens: 5, output_tokens: 9, cache_creation_input_tokens: 30, cache_creation_5m: 10, cache_creation_1h: 20 });
    expect(meter.final).toBe(true);
  });

  it('shows small sums to the tenth of a cent', () => {
    expect(usd(1_234_567)).toBe('$1.23');
    expect(usd(4200)).toBe('$0.0042');
    expect(usd(0)).toBe('$0.00');
  });
});
