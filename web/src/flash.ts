// A message for the next page to show (e.g. "Saved: version 3." after the editor navigates
// to the agent). Kept in memory for a few seconds: a reload, or coming back later, does not
// show it again.

const FRESH_MS = 3000
let pending: { key: string; text: string; at: number } | null = null

export function flash(key: string, text: string): void {
  pending = { key, text, at: Date.now() }
}

/** The message left for `key` just now, if any. */
export function takeFlash(key: string): string | null {
  if (pending === null || pending.key !== key || Date.now() - pending.at > FRESH_MS) return null
  return pending.text
}
