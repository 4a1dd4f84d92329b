import { useState } from 'react'
import { api, documentOf, query } from '../api'
import { ErrorBox, JsonBlock, Loading, PageHeader, StatusBadge, Tags } from '../components/bits'
import { Graph } from '../components/Graph'
import { href, navigate } from '../router'
import type { Route } from '../router'
import type { Agent, AgentVersion, Page, Run, UsageTotals } from '../types'
import { flash, takeFlash } from '../flash'
import { SCOPE_TEXT, can, useMyScope } from '../scope'
import { errorText, failureReason, formatCost, formatTime, plural, shortId, useAsync } from '../util'
import { everything, folderLabel } from '../folders'
import { MarkingBadges } from './Folders'
import { TriggersSection } from '../components/Triggers'

/** Which folder the agent is in, and (for those who may share it: moving changes who
 * inherits access) a select that moves it. */
function FolderSelect({ agent, canMove, onMoved }: { agent: Agent; canMove: boolean; onMoved: (a: Agent) => void }) {
  const folders = useAsync((s) => everything('/folders', s), [])
  const [error, setError] = useState<string | null>(null)
  const [moving, setMoving] = useState(false)
  const move = async (folderId: string) => {
    setMoving(true)
    try {
      onMoved(await api.patch<Agent>(`/agents/${agent.id}`, { folder_id: folderId }))
      setError(null)
    } catch (e) {
      setError(errorText(e))
    } finally {
      setMoving(false)
    }
  }
  const known = folders.data ?? []
  const here = known.find((f) => f.id === agent.folder_id)
  return (
    <>
      <h2>Folder</h2>
      {canMove && known.length > 0 ? (
        <div className="field">
          <label htmlFor="agent-folder" className="sr-only">Move to folder</label>
          <select id="agent-folder" data-testid="agent-folder" value={agent.folder_id ?? ''} disabled={moving} onChange={(e) => void move(e.target.value)}>
            {!here && <option value={agent.folder_id ?? ''}>{agent.folder_id ?? '(none)'}</option>}
            {known.map((f) => <option key={f.id} value={f.id}>{folderLabel(f)}</option>)}
          </select>
        </div>
      ) : (
        <p>{here ? folderLabel(here) : <code>{agent.folder_id ?? '—'}</code>}</p>
      )}
      {agent.folder_id && <a className="small" href={href(`/folders/${agent.folder_id}`)}>Open the folder</a>}
      {error && <p className="error-box" role="alert">{error}</p>}
    </>
  )
}

export function AgentDetailPage({ agentId, route }: { agentId: string; route: Route }) {
  const version = route.params.get('version')
  const current = useAsync((s) => api.get<Agent>(`/agents/${agentId}`, s), [agentId])
  const shown = useAsync(
    (s) => (version ? api.get<Agent>(`/agents/${agentId}/versions/${version}`, s) : api.get<Agent>(`/agents/${agentId}`, s)),
    [agentId, version],
  )
  const versions = useAsync((s) => api.get<{ data: AgentVersion[] }>(`/agents/${agentId}/versions`, s), [agentId])
  const runs = useAsync((s) => api.get<Page<Run>>(`/runs${query({ agent_id: agentId, limit: 10 })}`, s), [agentId])
  const usage = useAsync((s) => api.get<UsageTotals>(`/usage${query({ agent_id: agentId })}`, s), [agentId])
  const [actionError, setActionError] = useState<string | null>(null)
  const [copying, setCopying] = useState(false)
  const [saved] = useState(() => takeFlash(agentId))
  const scope = useMyScope(current.data)
  const [moved, setMoved] = useState<Agent | null>(null)

  if (current.error) return <ErrorBox error={current.error} title="This agent cannot be shown" />
  const agent = moved ?? current.data
  const doc = shown.data
  if (!agent || !doc) return <Loading what="the agent" />
  const owner = can(scope, 'share')

  const remove = async () => {
    if (!window.confirm(`Delete ${agent.name} and all its versions?`)) return
    try {
      await api.del(`/agents/${agent.id}`)
      navigate('/agents')
    } catch (e) {
      setActionError(errorText(e))
    }
  }

  // A copy is the caller's own, editable, at version 1, named by the server (docs/api.md).
  const copy = async () => {
    setCopying(true)
    try {
      const made = await api.post<Agent>(`/agents/${agent.id}/copy`)
      flash(made.id, `Copied ${agent.name} to ${made.name}: this copy is yours to change.`)
      navigate(`/agents/${made.id}`)
    } catch (e) {
      setActionError(errorText(e))
    } finally {
      setCopying(false)
    }
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">{agent.alias || agent.name}</span>}
        sub={
          <>
            <code>{agent.name}</code> · <code>{agent.id}</code>
          </>
        }
      >
        {can(scope, 'run') && agent.input_mode === 'chat' && <a className="button primary" href={href(`/chat/${agent.id}`)}>Chat</a>}
        {can(scope, 'run') && <a className={agent.input_mode === 'chat' ? 'button' : 'button primary'} href={href(`/agents/${agent.id}/run`)}>Start a run</a>}
        {can(scope, 'edit') && <a className="button" href={href(`/agents/${agent.id}/edit`)}>Edit</a>}
        {scope !== null && (
          <button type="button" onClick={copy} disabled={copying}>{copying ? 'Copying…' : 'Copy'}</button>
        )}
        {!agent.is_builtin && <a className="button" href={href(`/agents/${agent.id}/sharing`)}>Sharing</a>}
        {owner && <button type="button" className="danger" onClick={remove}>Delete</button>}
      </PageHeader>
      <div aria-live="polite">{saved && <p className="success" role="status" data-testid="saved-notice">{saved}</p>}</div>
      {actionError && <p className="error-box" role="alert">{actionError}</p>}
      {agent.is_builtin && (
        <p className="notice" data-testid="builtin-notice">
          A built-in agent, shipped with dhub: everyone may run it, no one may change it (it is upgraded with dhub).
          To change it, <strong>Copy</strong> it: the copy is yours.
        </p>
      )}
      <p>{agent.description}</p>
      <div className="meta">
        {agent.is_builtin && <span className="pill builtin">built-in</span>}
        <span className="pill">{agent.mode}</span>
        <span className="pill">{agent.input_mode}</span>
        {agent.type && agent.type !== agent.mode && <span className="pill">{agent.type}</span>}
        <Tags tags={agent.tags} onPick={(t) => navigate('/agents', { tags: t })} />
        <MarkingBadges markings={agent.effective_markings ?? agent.markings} />
        <span className="muted small" data-testid="my-scope" data-scope={scope ?? ''}>
          your access: {scope ? SCOPE_TEXT[scope] : agent.my_share_scope ?? 'none'}
        </span>
      </div>

      <div className="two-col">
        <div>
          <h2>{version ? `Version ${version}` : `Graph (version ${agent.version})`}</h2>
          {version && (
            <p className="notice">
              Showing version {version} of {agent.version}. <a href={href(`/agents/${agent.id}`)}>Show the latest</a> ·{' '}
              {can(scope, 'edit') && <><a href={href(`/agents/${agent.id}/edit`, { version })}>Edit from this version</a> (saving it restores it as a new version)</>}
            </p>
          )}
          <Graph agent={doc} label={`Graph of ${agent.name}`} />
          <details className="doc-details">
            <summary>Document{version ? ` (version ${version})` : ''}</summary>
            <JsonBlock value={documentOf(doc)} label="Agent document" />
          </details>
        </div>
        <aside>
          <h2>Versions</h2>
          <ErrorBox error={versions.error} />
          {versions.data ? (
            <ol className="versions" data-testid="versions" reversed>
              {versions.data.data.map((v) => (
                <li key={v.version}>
                  <a
                    href={href(`/agents/${agent.id}`, { version: v.version === agent.version ? null : String(v.version) })}
                    aria-current={String(v.version) === (version ?? String(agent.version)) ? 'true' : undefined}
                  >
                    Version {v.version}
                  </a>{' '}
                  <span className="muted small">{formatTime(v.created_at)} by {v.created_by}</span>
                </li>
              ))}
            </ol>
          ) : (
            <Loading />
          )}
          <FolderSelect agent={agent} canMove={owner} onMoved={setMoved} />
          <h2>Owners</h2>
          <ul className="plain">
            {agent.owners.map((o) => (
              <li key={o.id}>{o.display_name} <span className="muted small">{o.id}</span></li>
            ))}
            {agent.is_builtin && <li className="muted">None: dhub ships it.</li>}
          </ul>
          <h2>Recent runs</h2>
          {runs.data?.data.length ? (
            <ul className="plain">
              {runs.data.data.map((r) => (
                <li key={r.id}>
                  <a href={href(`/runs/${r.id}`)}>{shortId(r.id)}</a> <StatusBadge status={r.status} />{' '}
                  <span className="muted small">{formatTime(r.created_at)}</span>
                  {r.status === 'failed' && r.error && <div className="run-reason small" data-testid="run-reason">{failureReason(r.error, 100)}</div>}
                </li>
              ))}
            </ul>
          ) : (
            <p className="muted">No runs yet.</p>
          )}
          <a href={href('/runs', { agent_id: agent.id })}>All runs of this agent</a>
          <h2>Usage</h2>
          {usage.data ? (
            <p data-testid="agent-usage">
              {plural(usage.data.runs, 'run')}, {plural(usage.data.total_tokens ?? 0, 'token')}:{' '}
              <strong>{formatCost(usage.data.cost_usd)}</strong>
              {usage.data.cost_note && <span className="muted small"> ({usage.data.cost_note})</span>}
            </p>
          ) : (
            <p className="muted">{usage.error ? errorText(usage.error) : 'Loading…'}</p>
          )}
        </aside>
      </div>
      {/* Triggers are for the agent's editors (the API answers no one else), on event agents. */}
      {agent.input_mode === 'event' && can(scope, 'edit') && !agent.is_builtin && <TriggersSection agentId={agent.id} />}
    </section>
  )
}
