// What a stranger wrote, as the agent and the console get it: through the core's one
// sanitizer (`escapeText`, the approval prompts' own), so an invisible or direction-changing
// character in a subject, a body, a sender's name or an attachment's name reaches them as a
// visible escape (⟦U+202E⟧), never as itself and never silently removed. Applied once, where
// the plugin hands the text out (the event, the tools' answers, the console's list), never
// to text already escaped: an escape escaped again would read as something else.
import { escapeText } from '#sdk';
import type { MailView } from './mail.js';

export const external = (text: string): string => escapeText(text);

/** An attachment as the agent sees it: its name escaped. */
export function externalAttachment(a: { filename: string; size: number; content_type: string }): { filename: string; size: number; content_type: string } {
  return { filename: external(a.filename), size: a.size, content_type: external(a.content_type) };
}

/** `text` escaped, cut to at most `max` characters without cutting an escape in two. */
export function externalBounded(text: string, max: number): { text: string; cut: boolean } {
  const escaped = external(text);
  if (escaped.length <= max) return { text: escaped, cut: false };
  let head = escaped.slice(0, max);
  const open = head.lastIndexOf('⟦');
  if (open > head.lastIndexOf('⟧')) head = head.slice(0, open);
  return { text: head, cut: true };
}

/** The body as the agent gets it: what a reader sees, escaped, and what was left out said. */
export function agentBody(view: Pick<MailView, 'body' | 'hiddenChars' | 'styleGaps' | 'truncated'>, max: number): { body: string; truncated: boolean } {
  const { text, cut } = externalBounded(view.body, max);
  const hidden = view.hiddenChars > 0 ? `\n\n[Carapace: ${view.hiddenChars.toLocaleString('en-US')} characters of this mail's HTML were hidden from a reader (invisible by their style or markup) and were left out.]` : '';
  return { body: `${text}${hidden}${styleGapNote(view.styleGaps)}`, truncated: view.truncated || cut };
}

/** The agent's note when the mail's style sheets were not evaluated in full (the phrases are Carapace's own). */
export function styleGapNote(gaps: readonly string[]): string {
  if (gaps.length === 0) return '';
  return `\n\n[Carapace: this mail's style sheets were not evaluated in full (${gaps.join('; ')}): text they hide may appear above as if a reader saw it.]`;
}

/** What the agent is told of a mail: every field a stranger wrote, escaped. */
export function agentFields(view: MailView, max: number): {
  from: string | null;
  from_name: string;
  reply_to: string[];
  to: string[];
  cc: string[];
  subject: string;
  body: string;
  truncated: boolean;
  hidden_chars: number;
  styles_not_evaluated: string[];
  attachments: Array<{ filename: string; size: number; content_type: string }>;
} {
  const { body, truncated } = agentBody(view, max);
  return {
    from: view.from === null ? null : external(view.from),
    from_name: external(view.fromName),
    reply_to: view.reply_to.map(external),
    to: view.to.map(external),
    cc: view.cc.map(external),
    subject: external(view.subject),
    body,
    truncated,
    hidden_chars: view.hiddenChars,
    styles_not_evaluated: view.styleGaps,
    attachments: view.attachments.map(externalAttachment),
  };
}
