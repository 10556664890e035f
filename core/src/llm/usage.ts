// Token usage from a Messages API response as it streams past: the last "usage"
// numbers seen in message_start / message_delta events (or a plain JSON body).
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  /** Prompt tokens written to or read from the prompt cache: processed, and billed, too. */
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

const COUNTS = ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;

export class UsageMeter {
  private tail = '';
  readonly usage: Usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
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
      const value = JSON.parse(text) as { type?: string; usage?: Partial<Usage>; message?: { usage?: Partial<Usage> } };
      const usage = value.usage ?? value.message?.usage;
      if ((value.type === 'message_delta' || value.type === 'message') && value.usage) this.final = true;
      for (const name of COUNTS) {
        const n = usage?.[name];
        // message_delta repeats the counts cumulatively; a 0 there does not undo message_start's.
        if (typeof n === 'number' && Number.isFinite(n) && n >= 0 && (n > 0 || name === 'output_tokens')) this.usage[name] = n;
      }
    } catch {
      // not a complete JSON line: nothing to count
    }
  }
}
