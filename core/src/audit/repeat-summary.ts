// Repeated identical rejections, summarised. The key is what the core decided (session,
// stage, code), never what the caller chose (topic, correlation), so varying those does
// not dodge it. The first rejection of a burst is written whole; the rest within the
// window are counted, with a few sample topics, and one summary line closes the window.
import type { AuditInput, AuditStage } from './audit-log.js';

export interface RepeatKey {
  group: string | null;
  session: string | null;
  stage: AuditStage;
  code: string;
}

interface Burst extends RepeatKey {
  opened: number;
  repeats: number;
  samples: string[];
}

const SAMPLES = 5;
const SAMPLE_CHARS = 64;

export class RepeatSummariser {
  private readonly bursts = new Map<string, Burst>();
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param windowMs how long a burst stays open after its first rejection.
   * @param maxBursts open bursts kept; past it, rejections fold into one burst per stage
   *   and code for all sessions (a small fixed set), so memory stays bounded.
   * @param emit writes a summary line.
   */
  constructor(
    private readonly windowMs: number,
    private readonly maxBursts: number,
    private readonly emit: (summary: AuditInput) => void,
  ) {}

  /** True: write this rejection whole (it opens a burst). False: it was counted. */
  admit(key: RepeatKey, topic: string | null, now = Date.now()): boolean {
    let id = `${key.session ?? '-'} ${key.stage} ${key.code}`;
    let burst = this.bursts.get(id);
    if (burst && now - burst.opened >= this.windowMs) {
      this.close(id, burst);
      burst = undefined;
    }
    if (!burst && this.bursts.size >= this.maxBursts) {
      id = `* ${key.stage} ${key.code}`;
      burst = this.bursts.get(id);
      key = { group: null, session: null, stage: key.stage, code: key.code };
    }
    if (!burst) {
      this.bursts.set(id, { ...key, opened: now, repeats: 0, samples: [] });
      this.schedule();
      return true;
    }
    burst.repeats++;
    const sample = (topic ?? '').slice(0, SAMPLE_CHARS);
    if (burst.samples.length < SAMPLES && !burst.samples.includes(sample)) burst.samples.push(sample);
    return false;
  }

  /** Closes the bursts whose window has passed; with `all`, every burst (at shutdown). */
  sweep(all = false, now = Date.now()): void {
    for (const [id, burst] of this.bursts) if (all || now - burst.opened >= this.windowMs) this.close(id, burst);
    if (this.bursts.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  get open(): number {
    return this.bursts.size;
  }

  private close(id: string, burst: Burst): void {
    this.bursts.delete(id);
    if (burst.repeats === 0) return;
    const seconds = Math.round(this.windowMs / 100) / 10;
    this.emit({
      group: burst.group,
      session: burst.session,
      source: burst.session ?? 'core',
      topic: null,
      correlation: null,
      stage: burst.stage,
      outcome: 'rejected',
      code: burst.code,
      reason: `${burst.repeats} more like this in ${seconds} s`,
      repeats: burst.repeats,
      samples: burst.samples,
    });
  }

  private schedule(): void {
    if (this.timer) return;
    // A coarse sweep: a summary lands within a second of its window's end.
    this.timer = setInterval(() => this.sweep(), Math.min(1000, this.windowMs)).unref();
  }
}
