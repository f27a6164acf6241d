/** The longest description x402 discovery catalogues keep (Bazaar). */
export const BRIEF_MAX_CHARS = 500;

/**
 * A route's description for payment requirements and discovery listings: the whole description
 * when it fits in BRIEF_MAX_CHARS, else as many of its sentences as fit (the rest is in /openapi.json).
 */
export function brief(description: string): string {
  if (description.length <= BRIEF_MAX_CHARS) return description;
  let kept = "";
  for (const sentence of description.match(/[^.]+(\.(\s+|$)|$)/g) ?? []) {
    if ((kept + sentence).trimEnd().length > BRIEF_MAX_CHARS) break;
    kept += sentence;
  }
  return kept.trimEnd() || `${description.slice(0, BRIEF_MAX_CHARS - 1)}…`;
}
