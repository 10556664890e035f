// Token usage from a Messages API response as it streams past: the last "usage"
// numbers seen in message_start / message_delta events (or a plain JSON body).
export interface Usage {
  input_tokens: number;
  output_tokens: number;
}

export class UsageMeter {
  private tail = '';
  readonly usage: Usage = { input_tokens: 0, output_tokens: 0 };

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

  private scan(text: string): void {
    if (!text.includes('"usage"')) return;
    try {
      const value = JSON.parse(text) as { usage?: Partial<Usage>; message?: { usage?: Partial<Usage> } };
      const usage = value.usage ?? value.message?.usage;
      if (typeof usage?.input_tokens === 'number' && usage.input_tokens > 0) this.usage.input_tokens = usage.input_tokens;
      if (typeof usage?.output_tokens === 'number') this.usage.output_tokens = usage.output_tokens;
    } catch {
      // not a complete JSON line: nothing to count
    }
  }
}
