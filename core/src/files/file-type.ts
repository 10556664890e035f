// What a file from an agent's workspace is, decided from its bytes (never from its name
// or what the agent says): the few kinds a person can open safely. Anything else is
// refused, so that nothing executable or scriptable (HTML, SVG, archives, programs)
// reaches the browser from an agent.

export interface FileKind {
  type: string;
  /** Shown in the page (raster images); everything else is only downloaded. */
  inline: boolean;
}

const SIGNATURES: { type: string; inline: boolean; magic: number[]; also?: { at: number; magic: number[] } }[] = [
  { type: 'image/png', inline: true, magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', inline: true, magic: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', inline: true, magic: [0x47, 0x49, 0x46, 0x38] },
  { type: 'image/webp', inline: true, magic: [0x52, 0x49, 0x46, 0x46], also: { at: 8, magic: [0x57, 0x45, 0x42, 0x50] } },
  { type: 'application/pdf', inline: false, magic: [0x25, 0x50, 0x44, 0x46, 0x2d] },
];

const startsWith = (bytes: Buffer, magic: number[], at = 0): boolean => magic.every((b, i) => bytes[at + i] === b);

/** Text a person can read: valid UTF-8 without control characters other than tab and line breaks. */
function isPlainText(bytes: Buffer): boolean {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return false;
  }
  return !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text);
}

/** The kind of `bytes`, or null when it is none the console hands to a person. */
export function fileKind(bytes: Buffer): FileKind | null {
  for (const s of SIGNATURES) {
    if (startsWith(bytes, s.magic) && (!s.also || startsWith(bytes, s.also.magic, s.also.at))) return { type: s.type, inline: s.inline };
  }
  return isPlainText(bytes) ? { type: 'text/plain; charset=utf-8', inline: false } : null;
}
