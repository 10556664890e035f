// A confirmation prompt as Telegram shows it, from the core's description of the call.
import { truncate } from '#sdk';

// Telegram allows 4,096 characters per message. A prompt is rendered from the core's
// description of the call (escaped, with warnings): the message with the buttons holds the
// warnings, the tool, the group and one line per argument, at most PROMPT_CHUNK characters.
// The complete (escaped) arguments go in messages before it only when that takes at most
// PROMPT_MESSAGES messages in all; otherwise the prompt points to the console.
const PROMPT_CHUNK = 3500;
const PROMPT_MESSAGES = 3;
/** Of the buttons' message: at most this much for the warnings. */
const WARNINGS_BUDGET = 1200;

/**
 * A prompt from the core's description of the call (core/src/confirm/describe-call.ts):
 * `text` (warnings first, then tool, group and one line per argument, at most PROMPT_CHUNK
 * characters) goes with the buttons; `before` holds the complete escaped arguments when
 * they say more than the lines and fit, so that the prompt takes at most PROMPT_MESSAGES messages.
 */
export function renderPrompt(tool: string, group: string, raw: unknown, minutes: number | null): { before: string[]; text: string; hash: string | null } {
  const d = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const list = (v: unknown): string[] => (Array.isArray(v) ? v.map((x) => String(x)) : []);
  const warnings = list(d.warnings);
  // What the call refers to on the host (its plugin says) goes with the arguments, after them.
  const state = list(d.state);
  const summary = [...list(d.summary), ...(state.length > 0 ? ['What it refers to:', ...state.map((l) => `↳ ${l}`)] : [])];
  const full = typeof d.full === 'string' ? d.full : '';
  const hash = typeof d.hash === 'string' && /^[0-9a-f]{64}$/.test(d.hash) ? d.hash : null;
  const described = typeof d.full === 'string';
  const expiry = minutes ? `\n(expires in ${minutes} min)` : '';

  let head = '';
  for (const [i, w] of warnings.entries()) {
    const line = `⚠️ ${truncate(w, 400)}\n`;
    if (head.length + line.length > WARNINGS_BUDGET) {
      head += `⚠️ …and ${warnings.length - i} more warnings (on the console's Approvals page)\n`;
      break;
    }
    head += line;
  }
  if (head) head += '\n';
  const title = `Approve ${tool} for group "${group}"?`;

  // The complete arguments: before the buttons when they add something and fit.
  const fullParts = chunks(full, PROMPT_CHUNK - 100);
  const fullFits = described && full.length > 0 && fullParts.length <= PROMPT_MESSAGES - 1;
  const needsFull = !described || d.summary_cut === true;
  const before = needsFull && fullFits ? fullParts.map((part, i) => `The complete arguments of the ${tool} request below (part ${i + 1}/${fullParts.length}):\n${part}`) : [];
  const pointer = !needsFull ? '' : before.length > 0 ? `\n(the complete arguments are in the message${before.length > 1 ? 's' : ''} above)` : `\n(the complete arguments${full ? ` (${full.length.toLocaleString('en-US')} characters)` : ''} are on the console's Approvals page)`;

  const budget = PROMPT_CHUNK - head.length - title.length - pointer.length - expiry.length - 80;
  let lines = '';
  for (const [i, line] of summary.entries()) {
    const shown = `\n${truncate(line, 700)}`;
    if (lines.length + shown.length > budget) {
      lines += `\n…and ${summary.length - i} more arguments (on the console's Approvals page)`;
      break;
    }
    lines += shown;
  }
  const text = `${head}${title}${lines}${pointer}${expiry}`;
  return { before, text: truncate(text, PROMPT_CHUNK), hash };
}

/** `text` in pieces of at most `size` characters (never splitting a surrogate pair). */
function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out.length ? out : [''];
}
