// The confirmation prompts this plugin put in chats and has not yet closed, kept in its
// data directory: a prompt outlives the process that sent it (and the core that asked),
// so after any restart each one can still be edited to say how its request ended,
// instead of keeping live buttons for a request nobody waits for. Bounded; the oldest go first.
import { join } from 'node:path';
import { readVersionedJson, versionedJsonText, writeAtomically } from '#sdk';

const FILE = 'prompts.json';

/** One message that carries a confirmation's buttons. */
export interface Prompt {
  chat: string;
  message_id: number;
  text: string;
}

function isPrompt(value: unknown): value is Prompt {
  const p = value as Partial<Prompt> | null;
  return typeof p?.chat === 'string' && typeof p.message_id === 'number' && typeof p.text === 'string';
}

export class PromptLedger {
  private readonly file: string;
  /** Confirmation id → its prompts, oldest first. */
  private readonly open = new Map<string, Prompt[]>();

  constructor(
    dir: string,
    private readonly limit: number,
    /** A write that failed (a full disk): the prompt still works, only its closing after a restart is at risk. */
    private readonly onWriteError: (err: Error) => void = () => undefined,
  ) {
    this.file = join(dir, FILE);
  }

  /** What an earlier run left open. A corrupt file is moved aside (its name returned); a missing one is a first run. */
  load(): { movedAside?: string } {
    // Version 1: `{version, open}`; version 0 was the list alone.
    const saved = readVersionedJson(this.file, {
      migrations: [(json) => ({ open: json })],
      read: (json) => {
        const open = (json as { open?: unknown } | null)?.open;
        if (!Array.isArray(open)) throw new Error('not a list');
        return open as unknown[];
      },
    });
    if (saved.kind === 'moved') return { movedAside: saved.movedAside };
    for (const entry of saved.kind === 'loaded' ? saved.value : []) {
      const [id, prompts] = Array.isArray(entry) ? entry : [];
      if (typeof id === 'string' && Array.isArray(prompts) && prompts.every(isPrompt)) this.open.set(id, prompts);
    }
    return {};
  }

  ids(): string[] {
    return [...this.open.keys()];
  }

  get(id: string): Prompt[] | undefined {
    return this.open.get(id);
  }

  add(id: string, prompts: Prompt[]): void {
    this.open.set(id, prompts);
    while (this.open.size > this.limit) this.open.delete(this.open.keys().next().value as string);
    this.save();
  }

  /** The prompts of `id`, forgotten here: the caller closes them. */
  take(id: string): Prompt[] | undefined {
    const prompts = this.open.get(id);
    if (prompts && this.open.delete(id)) this.save();
    return prompts;
  }

  /** Synchronous and whole: a kill at any point leaves the old list or the new one. */
  private save(): void {
    try {
      writeAtomically(this.file, versionedJsonText(1, { open: [...this.open] }), 0o600);
    } catch (err) {
      this.onWriteError(err as Error);
    }
  }
}
