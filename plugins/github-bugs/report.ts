// The issue body: the agent's narrative, then the host-side evidence (this group's audit
// entries for each correlation id), compact and inert as Markdown.
import { createHash } from 'node:crypto';
import { truncate, type AuditEntry } from '#sdk';

/** GitHub refuses bodies over 65536 characters; stay well below. */
const BODY_LIMIT = 60_000;
const ENTRIES_PER_CORRELATION = 40;
const REASON_LIMIT = 240;

export interface Evidence {
  correlation: string;
  /** null: the audit log could not be asked. */
  entries: AuditEntry[] | null;
}

/** Credential-looking strings a narrative should never carry to a public tracker. */
const CREDENTIALS: RegExp[] = [
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
  /\b(?:Bearer|token)\s+[A-Za-z0-9._~+/=-]{16,}/gi,
  /\bsk-ant-[A-Za-z0-9_-]{10,}/g,
  /\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/g,
  /\b[0-9]{6,12}:[A-Za-z0-9_-]{30,}\b/g, // Telegram bot tokens
  /\b[a-z][a-z0-9+.-]*:\/\/[^\s:/@]+:[^\s@/]+@/gi, // credentials in URLs
];

export function scrubCredentials(text: string, secrets: string[]): string {
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join('[redacted]');
  for (const pattern of CREDENTIALS) out = out.replace(pattern, '[redacted]');
  return out;
}

/** One line of plain text for a table cell or a code block: no control characters, no fences. */
function cell(text: string, max: number): string {
  // eslint-disable-next-line no-control-regex
  return truncate(text.replace(/[\u0000-\u001f\u007f]+/g, ' ').replace(/`/g, "'").trim(), max);
}

function renderEntries(evidence: Evidence): string {
  const id = cell(evidence.correlation, 128);
  if (evidence.entries === null) return `**\`${id}\`**: the audit log could not be read.`;
  if (evidence.entries.length === 0) return `**\`${id}\`**: no audit entries in this group (unknown id, another group's, or no longer kept).`;
  const shown = evidence.entries.slice(-ENTRIES_PER_CORRELATION);
  const first = evidence.entries[0];
  const topic = first.topic ? ` ${cell(first.topic, 128)}` : '';
  const lines = shown.map((e) =>
    [e.timestamp, e.stage.padEnd(10), e.outcome.padEnd(9), cell(e.code ?? '-', 40).padEnd(20), (e.duration_ms !== undefined ? `${e.duration_ms}ms` : '-').padEnd(8), e.reason ? cell(e.reason, REASON_LIMIT) : '']
      .join(' ')
      .trimEnd(),
  );
  const skipped = evidence.entries.length - shown.length;
  return [
    `**\`${id}\`**${topic} (${evidence.entries.length} entr${evidence.entries.length === 1 ? 'y' : 'ies'}${skipped > 0 ? `, first ${skipped} omitted` : ''})`,
    '',
    '```text',
    'timestamp                stage      outcome   code                 duration reason',
    ...lines,
    '```',
  ].join('\n');
}

/**
 * What a person reads before approving: per correlation id, the evidence's size and its
 * reasons (where an agent-planted text would show), and a fingerprint of all of it, so an
 * approval names exactly the evidence that would be attached.
 */
export function describeEvidence(evidence: Evidence[], secrets: string[]): string[] {
  if (evidence.length === 0) return ['No host-side evidence: the report carries only the text above.'];
  const lines = evidence.map((e) => {
    const id = cell(e.correlation, 128);
    if (e.entries === null) return `Evidence for ${id}: the audit log could not be read.`;
    if (e.entries.length === 0) return `Evidence for ${id}: no audit entries in this group.`;
    const reasons = e.entries.map((x) => [x.code, x.reason && cell(scrubCredentials(x.reason, secrets), REASON_LIMIT)].filter(Boolean).join(' ')).filter(Boolean);
    return truncate(`Evidence for ${id}: ${e.entries.length} audit entr${e.entries.length === 1 ? 'y' : 'ies'}${reasons.length > 0 ? `: ${reasons.join(' | ')}` : ''}`, 3000);
  });
  const fingerprint = createHash('sha256').update(evidence.map((e) => renderEntries(e)).join('\n')).digest('hex').slice(0, 16);
  return [...lines, `Evidence fingerprint: ${fingerprint}`];
}

export function renderBody(opts: { description: string; severity: string; evidence: Evidence[]; secrets: string[] }): string {
  const head = [opts.description.trim(), '', '---', '', `**Severity:** ${opts.severity}`, '', '_Filed by the Carapace agent; the evidence below is from the host-side audit log._'].join('\n');
  const sections: string[] = [];
  if (opts.evidence.length > 0) {
    sections.push('', '### Host-side evidence', '');
    for (const evidence of opts.evidence) sections.push(renderEntries(evidence), '');
  }
  let body = scrubCredentials([head, ...sections].join('\n'), opts.secrets);
  if (body.length > BODY_LIMIT) {
    body = body.slice(0, BODY_LIMIT);
    if ((body.match(/```/g)?.length ?? 0) % 2 === 1) body += '\n```';
    body += '\n\n… (truncated)';
  }
  return body.trimEnd() + '\n';
}
