import { useState } from 'react'
import { ApiError, api } from '../api'
import { href } from '../router'
import type { Task } from '../types'
import { errorText, formatTime, shortId } from '../util'
import { FieldInput, initialText, messagesByField, valueOf } from './FieldInput'
import type { FieldSpec } from './FieldInput'

interface Props {
  task: Task
  agentName?: string
  /** called once answered, with what was done (the task names its run) */
  onDone: (message: string, task: Task) => void
  /** leaves out the run link (shown on the run's own page) */
  compact?: boolean
}

export function TaskCard({ task, agentName, onDone, compact }: Props) {
  const title = task.kind === 'await_input' ? 'Input needed' : `Confirm ${task.request.actor ?? 'an actor call'}`
  const headingId = `task-${task.run_id}-${task.command_id}`
  return (
    <article className="card task" data-testid="task" data-kind={task.kind} data-run={task.run_id} aria-labelledby={headingId}>
      <h2 id={headingId} className="card-title">{title}</h2>
      <p className="muted small">
        {agentName && <>{agentName} · </>}
        node <code>{task.node_id}</code>
        {task.frame && <> (frame <code>{task.frame}</code>)</>}
        {!compact && <> · run <a href={href(`/runs/${task.run_id}`)}>{shortId(task.run_id)}</a></>}
        {' '}· since {formatTime(task.created_at)}
        {task.due_at && <> · due {formatTime(task.due_at * 1000)}</>}
      </p>
      {task.kind === 'await_input' ? <InputForm task={task} onDone={(m) => onDone(m, task)} /> : <Confirmation task={task} onDone={(m) => onDone(m, task)} />}
    </article>
  )
}

function InputForm({ task, onDone }: { task: Task; onDone: (m: string) => void }) {
  const fields: FieldSpec[] = task.request.fields ?? []
  const [texts, setTexts] = useState<Record<string, string>>(() =>
    Object.fromEntries(fields.map((f) => [f.name, initialText(f)])),
  )
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const prefix = `in-${task.run_id}-${task.command_id}`

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    const values: Record<string, unknown> = {}
    const local: Record<string, string> = {}
    for (const f of fields) {
      try {
        const v = valueOf(f, texts[f.name] ?? '')
        if (v !== undefined) values[f.name] = v
      } catch (exc) {
        local[f.name] = errorText(exc)
      }
    }
    setErrors(local)
    setGeneral(null)
    if (Object.keys(local).length) return
    setBusy(true)
    try {
      await api.post(`/runs/${task.run_id}/inputs/${encodeURIComponent(task.node_id)}`, { values })
      onDone(`Answered ${task.node_id} of ${shortId(task.run_id)}.`)
    } catch (exc) {
      if (exc instanceof ApiError && exc.errors.length) {
        const byField: Record<string, string> = {}
        const rest: string[] = []
        for (const item of exc.errors) {
          const split = messagesByField(item.message, fields.map((f) => f.name))
          Object.assign(byField, split.byField)
          rest.push(...split.rest.filter(Boolean))
        }
        setErrors(byField)
        setGeneral(rest.length ? rest.join('; ') : null)
      } else {
        setGeneral(errorText(exc))
      }
    } finally {
      setBusy(false)
    }
  }

  return (
    <form onSubmit={submit} noValidate>
      {task.request.prompt && <p className="prompt" data-testid="task-prompt">{task.request.prompt}</p>}
      {fields.map((f) => (
        <FieldInput
          key={f.name}
          idPrefix={prefix}
          field={f}
          value={texts[f.name] ?? ''}
          onChange={(v) => setTexts((t) => ({ ...t, [f.name]: v }))}
          error={errors[f.name]}
        />
      ))}
      {general && <p className="field-error" role="alert">{general}</p>}
      <button type="submit" className="primary" disabled={busy}>{busy ? 'Sending…' : 'Submit'}</button>
    </form>
  )
}

function Confirmation({ task, onDone }: { task: Task; onDone: (m: string) => void }) {
  const original = task.request.arguments ?? {}
  const [texts, setTexts] = useState<Record<string, string>>(() =>
    // strings as they are, other values as JSON
    Object.fromEntries(Object.entries(original).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])),
  )
  const [reason, setReason] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const prefix = `cf-${task.run_id}-${task.command_id}`

  const decide = async (approve: boolean) => {
    setError(null)
    let body: Record<string, unknown>
    if (approve) {
      const args: Record<string, unknown> = {}
      for (const [k, text] of Object.entries(texts)) {
        if (typeof original[k] === 'string') {
          args[k] = text
          continue
        }
        try {
          args[k] = JSON.parse(text)
        } catch {
          setError(`'${k}' is not valid JSON: write it as JSON (a number, true, [..], {..}, "text").`)
          document.getElementById(`${prefix}-${k}`)?.focus()
          return
        }
      }
      const edited = JSON.stringify(args) !== JSON.stringify(original)
      body = edited ? { approve: true, arguments: args } : { approve: true }
    } else {
      if (!reason.trim()) {
        setError('Say why you reject it: the agent reads the reason.')
        document.getElementById(`${prefix}-reason`)?.focus()
        return
      }
      body = { approve: false, reason: reason.trim() }
    }
    setBusy(true)
    try {
      await api.post(`/runs/${task.run_id}/confirmations/${encodeURIComponent(task.command_id)}`, body)
      onDone(`${approve ? 'Approved' : 'Rejected'} ${task.request.actor ?? task.command_id}.`)
    } catch (exc) {
      setError(errorText(exc))
    } finally {
      setBusy(false)
    }
  }

  return (
    <form onSubmit={(e) => { e.preventDefault(); void decide(true) }}>
      <p>
        The agent wants to call <strong>{task.request.actor}</strong> with these arguments. Edit them before approving if
        needed.
      </p>
      <fieldset className="arguments">
        <legend>Arguments</legend>
        {Object.keys(texts).length === 0 && <p className="muted">No arguments.</p>}
        {Object.entries(texts).map(([k, v]) => (
          <div className="field" key={k}>
            <label htmlFor={`${prefix}-${k}`}>
              {k} <span className="muted small">({typeof original[k] === 'string' ? 'text' : 'JSON'})</span>
            </label>
            <input
              id={`${prefix}-${k}`}
              className="mono"
              value={v}
              data-testid={`argument-${k}`}
              onChange={(e) => setTexts((t) => ({ ...t, [k]: e.target.value }))}
            />
          </div>
        ))}
      </fieldset>
      <div className="field">
        <label htmlFor={`${prefix}-reason`}>Reason (for a rejection)</label>
        <textarea id={`${prefix}-reason`} rows={2} value={reason} onChange={(e) => setReason(e.target.value)} />
      </div>
      {error && <p className="field-error" role="alert">{error}</p>}
      <div className="row">
        <button type="submit" className="primary" disabled={busy}>Approve</button>
        <button type="button" className="danger" disabled={busy} onClick={() => void decide(false)}>Reject</button>
      </div>
    </form>
  )
}
