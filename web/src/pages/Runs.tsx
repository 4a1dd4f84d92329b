import { useEffect, useRef, useState } from 'react'
import { api, query } from '../api'
import { ErrorBox, Loading, PageHeader, StatusBadge } from '../components/bits'
import { href, replaceParams } from '../router'
import type { Route } from '../router'
import type { Agent, Page, Run } from '../types'
import { failureReason, formatDuration, formatTime, shortId, useAsync, useInterval } from '../util'

const STATUSES = ['queued', 'running', 'waiting', 'succeeded', 'failed', 'cancelled']

export function useAgentNames() {
  return useAsync(async (s) => {
    const page = await api.get<Page<Agent>>('/agents?limit=200', s)
    return page.data
  }, [])
}

export function RunsPage({ route }: { route: Route }) {
  const agentId = route.params.get('agent_id') ?? ''
  const status = route.params.get('status') ?? ''
  const agents = useAgentNames()
  const names = new Map((agents.data ?? []).map((a) => [a.id, a.alias || a.name]))
  const [runs, setRuns] = useState<Run[] | null>(null)
  const [cursor, setCursor] = useState<string | null>(null)
  const [error, setError] = useState<unknown>(null)
  const extended = useRef(false)

  const load = async (signal?: AbortSignal) => {
    try {
      const page = await api.get<Page<Run>>(`/runs${query({ agent_id: agentId, status, limit: 50 })}`, signal)
      if (extended.current) {
        // more pages are shown: refresh the rows of the first one, keep the rest
        const fresh = new Map(page.data.map((r) => [r.id, r]))
        setRuns((old) => (old ?? []).map((r) => fresh.get(r.id) ?? r))
      } else {
        setRuns(page.data)
        setCursor(page.next_cursor)
      }
      setError(null)
    } catch (e) {
      if (!signal?.aborted) setError(e)
    }
  }

  useEffect(() => {
    const controller = new AbortController()
    setRuns(null)
    setCursor(null)
    extended.current = false
    void load(controller.signal)
    return () => controller.abort()
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [agentId, status])
  useInterval(() => void load(), 4000)

  const more = async () => {
    if (!cursor) return
    try {
      const page = await api.get<Page<Run>>(`/runs${query({ agent_id: agentId, status, limit: 50, cursor })}`)
      extended.current = true
      setRuns((r) => [...(r ?? []), ...page.data])
      setCursor(page.next_cursor)
    } catch (e) {
      setError(e)
    }
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">Runs</span>}
        sub={agentId ? undefined : 'Your runs (an admin sees every run). Pick an agent to see all of its runs.'}
      />
      <form className="filters" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
        <div className="field">
          <label htmlFor="run-agent">Agent</label>
          <select id="run-agent" value={agentId} onChange={(e) => replaceParams('/runs', { agent_id: e.target.value, status })}>
            <option value="">mine (all agents)</option>
            {(agents.data ?? []).map((a) => (
              <option key={a.id} value={a.id}>{a.alias || a.name}</option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="run-status">Status</label>
          <select id="run-status" value={status} onChange={(e) => replaceParams('/runs', { agent_id: agentId, status: e.target.value })}>
            <option value="">any</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
      </form>
      <ErrorBox error={error} />
      {runs === null ? (
        <Loading what="runs" />
      ) : runs.length === 0 ? (
        <p className="muted">No runs.</p>
      ) : (
        <div className="table-wrap">
          <table className="table" data-testid="run-table">
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Agent</th>
                <th scope="col">Status</th>
                <th scope="col">Started</th>
                <th scope="col">Took</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => (
                <tr key={r.id} data-testid="run-row" data-run={r.id}>
                  <td data-label="Run"><a href={href(`/runs/${r.id}`)}>{shortId(r.id)}</a></td>
                  <td data-label="Agent">
                    <a href={href(`/agents/${r.agent_id}`)}>{names.get(r.agent_id) ?? shortId(r.agent_id)}</a>{' '}
                    <span className="muted small">v{r.agent_version}</span>
                  </td>
                  <td data-label="Status">
                    <div>
                      <StatusBadge status={r.status} />
                      {r.status === 'failed' && r.error && (
                        <div className="run-reason" data-testid="run-reason" title={failureReason(r.error, 10_000)}>{failureReason(r.error)}</div>
                      )}
                    </div>
                  </td>
                  <td data-label="Started">{formatTime(r.created_at)}</td>
                  <td data-label="Took">{r.finished_at && r.started_at ? formatDuration(r.finished_at - r.started_at) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {cursor && <button type="button" onClick={more}>Load more</button>}
    </section>
  )
}
