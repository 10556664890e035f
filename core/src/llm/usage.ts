// Token usage from a Messages API response as it streams past: the last "usage"
// numbers seen in message_start / message_delta events (or a plain JSON body).
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  /** Prompt tokens written to or read from the prompt cache: processed, and billed, too. */
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /** The cache writes split by lifetime, where the upstream says (`usage.cache_creation`). */
  cache_creation_5m: number;
  cache_creation_1h: number;
}

const COUNTS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;

type RawUsage = Partial<Record<(typeof COUNTS)[number], unknown>> & { cache_creation?: { ephemeral_5m_input_tokens?: unknown; ephemeral_1h_input_tokens?: unknown } };

const count = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n) && n >= 0;

export class UsageMeter {
  private tail = '';
  readonly usage: Usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cache_creation_5m: 0, cache_creation_1h: 0 };
  /** The final figures were seen: a stream's message_delta, or a whole (non-streamed) message. */
  final = false;

  push(chunk: Buffer): void {
    const text = this.tail + chunk.toString('utf8');
    const lines = text.split('\n');
    this.tail = lines.pop() ?? '';
    for (const line of lines) this.scan(line.startsWith('data:') ? line.slice(5) : line);
  }

  end(): Usage {
    this.scan(this.tail);
    this.tail = '';
    return this.usage;
  }

  /** Every token the request cost: prompt (cached or not) and output. */
  static total(usage: Usage): { input: number; output: number } {
    return { input: usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens, output: usage.output_tokens };
  }

  private scan(text: string): void {
    if (!text.includes('"usage"')) return;
    try {
      const value = JSON.parse(text) as { type?: string; usage?: RawUsage; message?: { usage?: RawUsage } };
      const usage = value.usage ?? value.message?.usage;
      if ((value.type === 'message_delta' || value.type === 'message') && value.usage) this.final = true;
      for (const name of COUNTS) {
        const n = usage?.[name];
        // message_delta repeats the counts cumulatively; a 0 there does not undo message_start's.
        if (count(n) && (n > 0 || name === 'output_tokens')) this.usage[name] = n;
      }
      const split = usage?.cache_creation;
      if (count(split?.ephemeral_5m_input_tokens) && split.ephemeral_5m_input_tokens > 0) this.usage.cache_creation_5m = split.ephemeral_5m_input_tokens;
      if (count(split?.ephemeral_1h_input_tokens) && split.ephemeral_1h_input_tokens > 0) this.usage.cache_creation_1h = split.ephemeral_1h_input_tokens;
    } catch {
      // not a complete JSON line: nothing to count
    }
  }
}
