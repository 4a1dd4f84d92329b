import { useMemo, useState } from 'react'
import { ApiError, api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { FieldInput, initialText, valueOf } from '../components/FieldInput'
import type { FieldSpec } from '../components/FieldInput'
import { splitPointer } from '../pointer'
import { href, navigate } from '../router'
import type { Agent, Run, StartVariable } from '../types'
import { DemoBanner } from '../components/Demo'
import { useDemoProviders } from '../demo'
import { SCOPE_TEXT, can, useMyScope } from '../scope'
import { errorText, useAsync } from '../util'

const EFFORTS = ['', 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']

/** The start node's variables (workflow), or the `message` a react agent gets. */
export function startFields(agent: Agent): FieldSpec[] {
  if (agent.mode === 'react') {
    return [{ name: 'message', type: 'string', required: true, description: 'The task for the agent.' }]
  }
  const start = agent.nodes.find((n) => n.type === 'start')
  const variables = (start?.config.variables ?? []) as StartVariable[]
  return variables.map((v) => ({ ...v, required: v.required !== false }))
}

export function StartRunPage({ agentId }: { agentId: string }) {
  const agent = useAsync((s) => api.get<Agent>(`/agents/${agentId}`, s), [agentId])
  if (agent.error) return <ErrorBox error={agent.error} />
  if (!agent.data) return <Loading what="the agent" />
  return <StartRunForm agent={agent.data} />
}

function StartRunForm({ agent }: { agent: Agent }) {
  const fields = useMemo(() => startFields(agent), [agent])
  const [texts, setTexts] = useState<Record<string, string>>(() => Object.fromEntries(fields.map((f) => [f.name, initialText(f)])))
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<string | null>(null)
  const [effort, setEffort] = useState('')
  const [busy, setBusy] = useState(false)
  const scope = useMyScope(agent)
  const demo = useDemoProviders(agent)
  const refused = scope !== null && !can(scope, 'run')

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    const inputs: Record<string, unknown> = {}
    const local: Record<string, string> = {}
    for (const f of fields) {
      try {
        const v = valueOf(f, texts[f.name] ?? '')
        if (v !== undefined) inputs[f.name] = v
      } catch (exc) {
        local[f.name] = errorText(exc)
      }
    }
    setErrors(local)
    setGeneral(null)
    if (Object.keys(local).length) {
      document.getElementById(`start-${Object.keys(local)[0]}`)?.focus()
      return
    }
    setBusy(true)
    try {
      const body: Record<string, unknown> = { inputs }
      if (effort) body.reasoning_effort = effort
      const run = await api.post<Run>(`/agents/${agent.id}/runs`, body)
      navigate(`/runs/${run.id}`)
    } catch (exc) {
      if (exc instanceof ApiError && exc.errors.length) {
        const byField: Record<string, string> = {}
        const rest: string[] = []
        for (const item of exc.errors) {
          const [head, name] = splitPointer(item.loc)
          if (head === 'inputs' && name && fields.some((f) => f.name === name)) byField[name] = item.message
          else rest.push(`${item.loc || '/'}: ${item.message}`)
        }
        setErrors(byField)
        setGeneral(rest.length ? rest.join(' ') : null)
        const first = Object.keys(byField)[0]
        if (first) document.getElementById(`start-${first}`)?.focus()
      } else {
        setGeneral(errorText(exc))
      }
    } finally {
      setBusy(false)
    }
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">Start a run of {agent.alias || agent.name}</span>}
        sub={<>Version {agent.version} · <a href={href(`/agents/${agent.id}`)}>back to the agent</a></>}
      />
      {refused && <p className="notice" data-testid="scope-notice">Your access is {SCOPE_TEXT[scope]}: starting a run will be refused.</p>}
      <DemoBanner providers={demo} what="This agent's model answers will come" testId="demo-banner" />
      <form className="card form" onSubmit={submit} noValidate data-testid="start-form">
        {fields.length === 0 && <p className="muted">This agent takes no inputs.</p>}
        {fields.map((f) => (
          <FieldInput
            key={f.name}
            idPrefix="start"
            field={f}
            value={texts[f.name] ?? ''}
            multiline={f.type === 'string'}
            onChange={(v) => setTexts((t) => ({ ...t, [f.name]: v }))}
            error={errors[f.name]}
          />
        ))}
        {agent.mode === 'react' && (
          <div className="field">
            <label htmlFor="start-effort">Reasoning effort</label>
            <select id="start-effort" value={effort} onChange={(e) => setEffort(e.target.value)}>
              {EFFORTS.map((x) => <option key={x} value={x}>{x || "the agent's"}</option>)}
            </select>
          </div>
        )}
        {general && <p className="field-error" role="alert">{general}</p>}
        <button type="submit" className="primary" disabled={busy || refused}>{busy ? 'Starting…' : 'Start run'}</button>
      </form>
    </section>
  )
}
