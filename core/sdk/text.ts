// Small text helpers shared by plugins.

/** `text` cut to at most `max` characters (UTF-16 units), an ellipsis (…) marking a cut. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
