import { useEffect, useState } from 'react'
import { api, query } from '../api'
import { ErrorBox, Loading, PageHeader, Tags } from '../components/bits'
import { href, replaceParams } from '../router'
import type { Route } from '../router'
import type { Agent, Page } from '../types'

export function AgentsPage({ route }: { route: Route }) {
  const p = route.params
  const filters = {
    q: p.get('q') ?? '',
    tags: p.get('tags') ?? '',
    mode: p.get('mode') ?? '',
    input_mode: p.get('input_mode') ?? '',
  }
  const [q, setQ] = useState(filters.q)
  const [tags, setTags] = useState(filters.tags)
  const [agents, setAgents] = useState<Agent[]>([])
  const [cursor, setCursor] = useState<string | null>(null)
  const [loading, setLoading] = useState(true)
  const [error, setError] = useState<unknown>(null)
  const key = JSON.stringify(filters)

  useEffect(() => {
    setQ(filters.q)
    setTags(filters.tags)
    const controller = new AbortController()
    setLoading(true)
    api
      .get<Page<Agent>>(`/agents${query({ ...filters, limit: 50 })}`, controller.signal)
      .then((page) => {
        setAgents(page.data)
        setCursor(page.next_cursor)
        setError(null)
      })
      .catch((e) => !controller.signal.aborted && setError(e))
      .finally(() => !controller.signal.aborted && setLoading(false))
    return () => controller.abort()
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key])

  const more = async () => {
    if (!cursor) return
    try {
      const page = await api.get<Page<Agent>>(`/agents${query({ ...filters, limit: 50, cursor })}`)
      setAgents((a) => [...a, ...page.data])
      setCursor(page.next_cursor)
    } catch (e) {
      setError(e)
    }
  }

  const apply = (changes: Partial<typeof filters>) => replaceParams('/agents', { ...filters, ...changes })
  // The typed fields too, at once: a filter changed before the cleared URL reached the page
  // would otherwise carry the old search back (the effect resets them a render later).
  const clear = () => {
    setQ('')
    setTags('')
    replaceParams('/agents', {})
  }
  const addTag = (tag: string) => {
    const set = new Set(filters.tags.split(',').map((t) => t.trim()).filter(Boolean))
    set.add(tag)
    apply({ tags: [...set].join(',') })
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Agents</span>}>
        <a className="button" href="#/examples">Apply an example</a>
        <a className="button primary" href="#/agents/new">New agent</a>
      </PageHeader>
      <form
        className="filters"
        role="search"
        aria-label="Filter agents"
        onSubmit={(e) => {
          e.preventDefault()
          apply({ q, tags })
        }}
      >
        <div className="field">
          <label htmlFor="agent-q">Search</label>
          <input id="agent-q" type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="name, alias or description" />
        </div>
        <div className="field">
          <label htmlFor="agent-tags">Tags</label>
          <input id="agent-tags" value={tags} onChange={(e) => setTags(e.target.value)} placeholder="demo, support" />
        </div>
        <div className="field">
          <label htmlFor="agent-mode">Mode</label>
          <select id="agent-mode" value={filters.mode} onChange={(e) => apply({ q, tags, mode: e.target.value })}>
            <option value="">any</option>
            <option value="workflow">workflow</option>
            <option value="react">react</option>
          </select>
        </div>
        <div className="field">
          <label htmlFor="agent-input">Input</label>
          <select id="agent-input" value={filters.input_mode} onChange={(e) => apply({ q, tags, input_mode: e.target.value })}>
            <option value="">any</option>
            <option value="chat">chat</option>
            <option value="event">event</option>
          </select>
        </div>
        <div className="field field-buttons">
          <button type="submit">Filter</button>
          {(filters.q || filters.tags || filters.mode || filters.input_mode) && (
            <button type="button" className="link-button" onClick={clear}>Clear</button>
          )}
        </div>
      </form>
      <ErrorBox error={error} />
      {loading ? (
        <Loading what="agents" />
      ) : agents.length === 0 ? (
        <p className="muted">No agents match. <a href="#/examples">Apply an example</a> or <a href="#/agents/new">create one</a>.</p>
      ) : (
        <ul className="agent-list" data-testid="agent-list">
          {agents.map((a) => (
            <li key={a.id} className="card agent-card" data-testid="agent-item" data-name={a.name}>
              <div className="agent-card-head">
                <a href={href(`/agents/${a.id}`)} className="agent-name">{a.alias || a.name}</a>
                {a.alias && <span className="muted small">{a.name}</span>}
              </div>
              <p className="agent-desc">{a.description || <span className="muted">No description.</span>}</p>
              <div className="meta">
                {a.is_builtin && <span className="pill builtin">built-in</span>}
                <span className="pill">{a.mode}</span>
                <span className="pill">{a.input_mode}</span>
                <span className="muted small">v{a.version}</span>
                <Tags tags={a.tags} onPick={addTag} />
              </div>
            </li>
          ))}
        </ul>
      )}
      {cursor && (
        <button type="button" onClick={more}>Load more</button>
      )}
    </section>
  )
}
