// Telegram refuses texts over 4096 characters: longer bodies go out as several messages,
// cut at a paragraph, line or word boundary when one is reasonably near the limit.
export const TELEGRAM_TEXT_LIMIT = 4096;

/** Splits `text` into chunks of at most `limit` UTF-16 units, never inside a surrogate pair. */
export function splitMessage(text: string, limit = TELEGRAM_TEXT_LIMIT): string[] {
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    const window = rest.slice(0, limit + 1);
    // A boundary in the second half of the window keeps chunks from becoming tiny.
    const floor = Math.floor(limit / 2);
    let cut = -1;
    let skip = 0;
    for (const separator of ['\n\n', '\n', ' ']) {
      const at = window.lastIndexOf(separator, limit - separator.length);
      if (at >= floor) {
        cut = at;
        skip = separator.length;
        break;
      }
    }
    if (cut < 0) {
      cut = limit;
      const code = rest.charCodeAt(cut - 1);
      if (code >= 0xd800 && code <= 0xdbff) cut -= 1; // keep the pair together
    }
    const chunk = rest.slice(0, cut).trimEnd();
    if (chunk.trim().length > 0) chunks.push(chunk);
    rest = rest.slice(cut + skip);
  }
  if (rest.trim().length > 0) chunks.push(rest);
  return chunks;
}
