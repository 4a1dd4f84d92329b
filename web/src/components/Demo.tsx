import type { ReactNode } from 'react'
import { howToConfigure } from '../demo'
import type { ResolvedProvider } from '../demo'

/** Says, before anything is read as an answer, that the demo model writes them. */
export function DemoBanner({ providers, what, testId }: { providers: ResolvedProvider[]; what: ReactNode; testId: string }) {
  if (!providers.length) return null
  const names = providers.map((p) => `'${p.name}'`).join(' and ')
  return (
    <div className="notice demo-notice" role="note" data-testid={testId}>
      <strong>Demo model.</strong> {what} from dhub&apos;s demo model, a scripted stand-in, not a real LLM:
      this server has no model provider {names} configured. For real answers, <strong>{howToConfigure(providers)}</strong>.
    </div>
  )
}

/** The mark on one reply the demo model wrote. */
export function DemoLabel({ providers }: { providers: ResolvedProvider[] }) {
  return (
    <span className="demo-label" data-testid="demo-label" title={`Not a real LLM: for real answers, ${howToConfigure(providers)}.`}>
      demo model reply
    </span>
  )
}
