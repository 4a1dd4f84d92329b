/* The Triggers section of an event agent's page (docs/triggers.md): its webhooks and
 * schedules, a webhook made here (its secret shown once), enabling, disabling, rotating,
 * deleting, and each trigger's history. Shown to the agent's editors: the API answers no one
 * else. A schedule's fields are shown as its config holds them (and its next fires when the
 * server sends them), so a new trigger type needs nothing here. */
import { useState } from 'react'
import { api } from '../api'
import { ErrorBox, Loading, StatusBadge } from './bits'
import { href } from '../router'
import { errorText, formatTime, shortId, useAsync } from '../util'

export interface Trigger {
  id: string
  agent_id: string
  type: string
  name: string
  description: string
  enabled: boolean
  config: Record<string, unknown> & { type: string }
  status: string
  stopped_reason: string | null
  runs_as: string
  url?: string
  secret?: string
  next_fires?: (string | number)[]
  created_at: number
  updated_at: number
}

interface TriggerEvent {
  id: string
  kind: string
  key: string | null
  status: string
  reason: string | null
  run_id: string | null
  at: number
}

function configText(config: Trigger['config']): string {
  return Object.entries(config)
    .filter(([k, v]) => k !== 'type' && v !== null && v !== undefined)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' · ')
}

function fireText(at: string | number): string {
  return typeof at === 'number' ? formatTime(at) : at
}

/** A secret the server shows this once: a read-only box to copy it from, and why. */
export function SecretOnce({ trigger, onDone }: { trigger: Trigger; onDone: () => void }) {
  const [copied, setCopied] = useState(false)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(trigger.secret ?? '')
      setCopied(true)
    } catch {
      setCopied(false) // no clipboard (an insecure origin): the box is selectable
    }
  }
  return (
    <div className="card secret-once" data-testid="trigger-secret-box" role="status">
      <p className="notice">
        <strong>Shown once.</strong> Copy this secret now: dhub keeps no readable copy, and no page or answer shows it
        again. Lost it? Rotate the secret to get a new one.
      </p>
      <label htmlFor="trigger-secret">Secret of {trigger.name}</label>
      <div className="row">
        <input id="trigger-secret" data-testid="trigger-secret" readOnly value={trigger.secret ?? ''} onFocus={(e) => e.target.select()} />
        <button type="button" onClick={() => void copy()}>{copied ? 'Copied' : 'Copy'}</button>
      </div>
      {trigger.url && (
        <p className="small">
          Post signed deliveries to <code data-testid="trigger-secret-url">{trigger.url}</code> (headers in{' '}
          <code>docs/triggers.md</code>).
        </p>
      )}
      <button type="button" onClick={onDone}>I have saved it</button>
    </div>
  )
}

function History({ agentId, trigger }: { agentId: string; trigger: Trigger }) {
  const events = useAsync(
    (s) => api.get<{ data: TriggerEvent[] }>(`/agents/${agentId}/triggers/${trigger.id}/history`, s),
    [agentId, trigger.id],
  )
  return (
    <div data-testid="trigger-history" data-trigger={trigger.id}>
      <div className="row spread">
        <h4>History of {trigger.name}</h4>
        <button type="button" onClick={events.reload} disabled={events.loading}>Refresh</button>
      </div>
      <ErrorBox error={events.error} />
      {!events.data ? (
        <Loading />
      ) : events.data.data.length === 0 ? (
        <p className="muted">Nothing yet: no delivery or tick.</p>
      ) : (
        <table className="table">
          <thead>
            <tr><th>When</th><th>Status</th><th>Run</th><th>Delivery</th><th>Reason</th></tr>
          </thead>
          <tbody>
            {events.data.data.map((e) => (
              <tr key={e.id} data-testid="trigger-event" data-status={e.status}>
                <td className="small">{formatTime(e.at)}</td>
                <td><StatusBadge status={e.status} /></td>
                <td>{e.run_id ? <a href={href(`/runs/${e.run_id}`)}>{shortId(e.run_id)}</a> : '—'}</td>
                <td><code className="small">{e.key ?? '—'}</code></td>
                <td className="small">{e.reason ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}

function TriggerRow({ agentId, trigger, onChanged, onSecret, onRemoved }: {
  agentId: string
  trigger: Trigger
  onChanged: (t: Trigger) => void
  onSecret: (t: Trigger) => void
  onRemoved: (id: string) => void
}) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [showHistory, setShowHistory] = useState(false)
  const path = `/agents/${agentId}/triggers/${trigger.id}`
  const act = async (work: () => Promise<void>) => {
    setBusy(true)
    try {
      await work()
      setError(null)
    } catch (e) {
      setError(errorText(e))
    } finally {
      setBusy(false)
    }
  }
  const active = trigger.status === 'active'
  const toggle = () => act(async () => onChanged(await api.patch<Trigger>(path, { enabled: !active })))
  const rotate = () => act(async () => {
    if (!window.confirm(`Give ${trigger.name} a new secret? The current one stops working at once.`)) return
    const rotated = await api.post<Trigger>(`${path}/rotate-secret`)
    onChanged(rotated)
    onSecret(rotated)
  })
  const remove = () => act(async () => {
    if (!window.confirm(`Delete the trigger ${trigger.name}?`)) return
    await api.del(path)
    onRemoved(trigger.id)
  })
  return (
    <>
      <tr data-testid="trigger-row" data-id={trigger.id} data-type={trigger.type} data-status={trigger.status}>
        <td>
          <strong>{trigger.name}</strong>
          <div className="muted small"><code>{trigger.id}</code></div>
        </td>
        <td><span className="pill">{trigger.type}</span></td>
        <td data-testid="trigger-status">
          <StatusBadge status={trigger.status} />
          {trigger.stopped_reason && <div className="small run-reason">{trigger.stopped_reason}</div>}
        </td>
        <td className="small">{trigger.runs_as}</td>
        <td className="small">
          {trigger.url && <code data-testid="trigger-url">{trigger.url}</code>}
          {configText(trigger.config) && <div className="muted">{configText(trigger.config)}</div>}
          {trigger.next_fires && trigger.next_fires.length > 0 && (
            <div data-testid="trigger-next-fires">next: {trigger.next_fires.slice(0, 3).map(fireText).join(', ')}</div>
          )}
        </td>
        <td>
          <div className="row wrap">
            <button type="button" disabled={busy} onClick={() => void toggle()}>{active ? 'Disable' : 'Enable'}</button>
            {trigger.type === 'webhook' && (
              <button type="button" disabled={busy} onClick={() => void rotate()}>Rotate secret</button>
            )}
            <button type="button" aria-expanded={showHistory} onClick={() => setShowHistory(!showHistory)}>History</button>
            <button type="button" className="danger" disabled={busy} onClick={() => void remove()}>Delete</button>
          </div>
          {error && <p className="error-box" role="alert">{error}</p>}
        </td>
      </tr>
      {showHistory && (
        <tr>
          <td colSpan={6}><History agentId={agentId} trigger={trigger} /></td>
        </tr>
      )}
    </>
  )
}

/** The webhook's config from the form: an optional mapping (JSON) and allowed sources. */
function webhookConfig(mapping: string, sources: string): Record<string, unknown> {
  const config: Record<string, unknown> = { type: 'webhook' }
  if (mapping.trim()) {
    let parsed: unknown
    try {
      parsed = JSON.parse(mapping)
    } catch (e) {
      throw new Error(`Mapping: not JSON (${e instanceof Error ? e.message : String(e)}). Write an object, e.g. {"ticket": "{{ body.title }}"}.`)
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new Error('Mapping: write an object of start variable to value, e.g. {"ticket": "{{ body.title }}"}.')
    }
    config.mapping = parsed
  }
  const allowed = sources.split(/[\s,]+/).filter(Boolean)
  if (allowed.length) config.allowed_sources = allowed
  return config
}

function NewWebhook({ agentId, onMade }: { agentId: string; onMade: (t: Trigger) => void }) {
  const [name, setName] = useState('webhook')
  const [mapping, setMapping] = useState('')
  const [sources, setSources] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const create = async () => {
    setBusy(true)
    try {
      const config = webhookConfig(mapping, sources)
      onMade(await api.post<Trigger>(`/agents/${agentId}/triggers`, { name, config }))
      setError(null)
    } catch (e) {
      setError(errorText(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <form onSubmit={(e) => { e.preventDefault(); void create() }} data-testid="new-webhook">
      <div className="row">
        <div className="field">
          <label htmlFor="new-webhook-name">Webhook name</label>
          <input id="new-webhook-name" value={name} onChange={(e) => setName(e.target.value)} required maxLength={200} />
        </div>
        <div className="field">
          <button type="submit" className="primary" disabled={busy}>{busy ? 'Creating…' : 'Create webhook'}</button>
        </div>
      </div>
      <details>
        <summary>Options: mapping, allowed sources</summary>
        <div className="field">
          <label htmlFor="new-webhook-mapping">Mapping (JSON: start variable → value or expression; empty: the body is the inputs)</label>
          <textarea id="new-webhook-mapping" rows={3} value={mapping} onChange={(e) => setMapping(e.target.value)}
            placeholder={'{"ticket": "{{ body.issue.title }}", "customer": "{{ headers[\'x-customer\'] }}"}'} />
        </div>
        <div className="field">
          <label htmlFor="new-webhook-sources">Allowed sources (addresses or CIDR networks, comma-separated; empty: anywhere)</label>
          <input id="new-webhook-sources" value={sources} onChange={(e) => setSources(e.target.value)} placeholder="192.0.2.0/24" />
        </div>
      </details>
      {error && <p className="error-box" role="alert">{error}</p>}
    </form>
  )
}

export function TriggersSection({ agentId }: { agentId: string }) {
  const triggers = useAsync((s) => api.get<{ data: Trigger[] }>(`/agents/${agentId}/triggers`, s), [agentId])
  const [secret, setSecret] = useState<Trigger | null>(null)
  const list = triggers.data?.data ?? []
  const replace = (t: Trigger) => triggers.setData({ data: list.map((x) => (x.id === t.id ? { ...t, secret: undefined } : x)) })
  const removed = (id: string) => triggers.setData({ data: list.filter((x) => x.id !== id) })
  const made = (t: Trigger) => {
    triggers.setData({ data: [...list, { ...t, secret: undefined }] })
    setSecret(t)
  }
  return (
    <section aria-labelledby="triggers-title" data-testid="triggers">
      <h2 id="triggers-title">Triggers</h2>
      <p className="muted small">
        Webhooks and schedules start this agent's runs, as the user who made them (or last enabled them). A trigger
        stops, saying why, when that user can no longer run the agent.
      </p>
      <ErrorBox error={triggers.error} />
      {secret && <SecretOnce trigger={secret} onDone={() => setSecret(null)} />}
      {!triggers.data ? (
        !triggers.error && <Loading what="the triggers" />
      ) : list.length === 0 ? (
        <p className="muted">No triggers yet.</p>
      ) : (
        <div className="table-wrap">
          <table className="table" data-testid="trigger-list">
            <thead>
              <tr><th>Name</th><th>Type</th><th>Status</th><th>Runs as</th><th>Where, when</th><th>Actions</th></tr>
            </thead>
            <tbody>
              {list.map((t) => (
                <TriggerRow key={t.id} agentId={agentId} trigger={t} onChanged={replace} onSecret={setSecret} onRemoved={removed} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <NewWebhook agentId={agentId} onMade={made} />
    </section>
  )
}
