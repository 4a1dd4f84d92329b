import { useState } from 'react'
import { api, applyAgent } from '../api'
import type { ApplyOutcome } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { href } from '../router'
import type { Agent, Example } from '../types'
import { useAsync } from '../util'

interface Result {
  outcome?: ApplyOutcome
  agent?: Agent
  error?: unknown
}

export function ExamplesPage() {
  const examples = useAsync((s) => api.get<{ data: Example[] }>('/examples', s), [])
  const [results, setResults] = useState<Record<string, Result>>({})
  const [busy, setBusy] = useState<string | null>(null)

  const apply = async (example: Example) => {
    setBusy(example.file)
    try {
      const { outcome, agent } = await applyAgent(example.document)
      setResults((r) => ({ ...r, [example.file]: { outcome, agent } }))
    } catch (error) {
      setResults((r) => ({ ...r, [example.file]: { error } }))
    } finally {
      setBusy(null)
    }
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Examples</span>} sub="Example agents this server was started with. Applying one creates it, or makes the agent of that name match it." />
      <ErrorBox error={examples.error} />
      {examples.loading && <Loading what="examples" />}
      {examples.data && examples.data.data.length === 0 && (
        <p className="muted">This server was started without examples (<code>dhub serve --examples DIR</code>).</p>
      )}
      <ul className="example-list">
        {examples.data?.data.map((ex) => {
          const result = results[ex.file]
          return (
            <li key={ex.file} className="card" data-testid="example" data-file={ex.file}>
              <h2 className="card-title">{ex.name}</h2>
              <p>{ex.description}</p>
              <div className="meta">
                <span className="pill">{ex.mode}</span>
                <span className="muted small">{ex.file}</span>
              </div>
              <div className="row">
                <button
                  type="button"
                  className="primary"
                  onClick={() => apply(ex)}
                  disabled={busy === ex.file}
                  aria-label={`Apply ${ex.name}`}
                >
                  {busy === ex.file ? 'Applying…' : 'Apply'}
                </button>
                <a className="button" href={href('/agents/new', { example: ex.file })}>Open in the editor</a>
              </div>
              <div aria-live="polite">
                {result?.agent && (
                  <p className="success" data-testid="apply-result">
                    {result.outcome} <a href={href(`/agents/${result.agent.id}`)}>{result.agent.name}</a> (version {result.agent.version})
                  </p>
                )}
              </div>
              {result?.error !== undefined && <ErrorBox error={result.error} title="Not applied" />}
            </li>
          )
        })}
      </ul>
    </section>
  )
}
