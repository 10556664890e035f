// Whether the core is there, as the plugin host's link to it says. While linked, a health
// file is kept fresh for Compose's healthcheck (a plugin host that lost its core, or whose
// event loop is stuck, is unhealthy); a core gone for longer than a bound ends the wait
// (the host exits and Compose starts it again, fresh).
import { rmSync, writeFileSync } from 'node:fs';

/** How often the health file is rewritten while linked; the healthcheck allows three times this. */
export const HEALTH_REFRESH_MS = 10_000;

export class CorePresence {
  private refresh: NodeJS.Timeout | null = null;
  private lost: NodeJS.Timeout | null = null;

  constructor(
    private readonly healthFile: string,
    private readonly lostAfterMs: number,
    private readonly onLost: () => void,
  ) {}

  linked(): void {
    if (this.lost) clearTimeout(this.lost);
    this.lost = null;
    this.touch();
    this.refresh ??= setInterval(() => this.touch(), HEALTH_REFRESH_MS).unref();
  }

  /** Not linked (yet, or any more): unhealthy at once, and the bound starts. */
  unlinked(): void {
    if (this.refresh) clearInterval(this.refresh);
    this.refresh = null;
    rmSync(this.healthFile, { force: true });
    this.lost ??= setTimeout(this.onLost, this.lostAfterMs);
    this.lost.unref();
  }

  close(): void {
    if (this.refresh) clearInterval(this.refresh);
    if (this.lost) clearTimeout(this.lost);
    rmSync(this.healthFile, { force: true });
  }

  private touch(): void {
    try {
      writeFileSync(this.healthFile, `${new Date().toISOString()}\n`);
    } catch {
      // the run directory is gone: the healthcheck fails, which is the truth
    }
  }
}
