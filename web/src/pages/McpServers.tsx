// MCP servers (docs/mcp.md "Using MCP servers' tools"): the list, a new server from a form or
// from YAML, and one server: how it is reached (secrets shown as the references they are:
// the API never returns a secret's value) and the tools it offers agents.

import { useMemo, useState } from 'react'
import type { ReactNode } from 'react'
import { stringify as toYaml } from 'yaml'
import { ApiError, api } from '../api'
import { CodeEditor } from '../components/CodeEditor'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { everything } from '../folders'
import { isSecret, mcpPath, parametersOf, toolsError, whereOf } from '../mcp'
import type { McpServer, McpTools, McpValue } from '../mcp'
import { locate, parseText } from '../pointer'
import { href, navigate } from '../router'
import type { ErrorItem } from '../types'
import { errorText, useAsync } from '../util'
import { MarkingBadges } from './Folders'

export function McpServersPage({ serverId }: { serverId: string | null }) {
  if (serverId === 'new') return <NewServer />
  return serverId ? <ServerView key={serverId} serverId={serverId} /> : <ServerList />
}

/** Every MCP server the caller can see. */
function ServerList() {
  const list = useAsync((s) => everything('/mcp-servers', s) as Promise<McpServer[]>, [])
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">MCP servers</span>} sub="Model Context Protocol servers whose tools agents use: add them to an agent in its editor.">
        <a className="button primary" href={href('/mcp-servers/new')}>New MCP server</a>
      </PageHeader>
      <ErrorBox error={list.error} />
      {!list.data ? (
        <Loading what="MCP servers" />
      ) : list.data.length === 0 ? (
        <p className="muted">No MCP servers that you can see.</p>
      ) : (
        <table className="table" data-testid="mcp-servers">
          <thead>
            <tr><th>Name</th><th>Transport</th><th>Where</th><th>Allowed tools</th><th>Markings</th></tr>
          </thead>
          <tbody>
            {list.data.map((s) => (
              <tr key={s.id} data-testid="mcp-server-row" data-name={s.name}>
                <td data-label="Name"><a href={href(`/mcp-servers/${s.id}`)}>{s.alias || s.name}</a></td>
                <td data-label="Transport">{s.transport}</td>
                <td data-label="Where"><code>{whereOf(s)}</code></td>
                <td data-label="Allowed tools">{s.allowed_tools ? s.allowed_tools.join(', ') : <span className="muted">all</span>}</td>
                <td data-label="Markings"><span><MarkingBadges markings={s.effective_markings} /></span></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

// -- one server ---------------------------------------------------------------------------

function ServerView({ serverId }: { serverId: string }) {
  const server = useAsync((s) => api.get<McpServer>(mcpPath(serverId), s), [serverId])
  const [deleteError, setDeleteError] = useState<unknown>(null)
  const s = server.data
  const remove = async () => {
    if (!s || !window.confirm(`Delete the MCP server ${s.name}? Agents that list it lose its tools.`)) return
    try {
      await api.del(mcpPath(s.id))
      navigate('/mcp-servers')
    } catch (e) {
      setDeleteError(e)
    }
  }
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{s ? s.alias || s.name : 'MCP server'}</span>} sub={s?.description}>
        <a className="button" href={href('/mcp-servers')}>All MCP servers</a>
        {s && <button type="button" className="danger" onClick={() => void remove()}>Delete</button>}
      </PageHeader>
      <ErrorBox error={server.error} title="This MCP server cannot be shown" />
      <ErrorBox error={deleteError} title="Cannot delete it" />
      {!s ? (
        !server.error && <Loading what="the MCP server" />
      ) : (
        <>
          <div className="meta">
            <code>{s.id}</code> <span className="pill">version {s.version}</span> <span className="pill">{s.transport}</span>
            <MarkingBadges markings={s.effective_markings} />
          </div>
          <h2>Connection</h2>
          <Connection server={s} />
          <h2>Tools</h2>
          <Tools server={s} />
        </>
      )}
    </section>
  )
}

function Connection({ server }: { server: McpServer }) {
  const http = server.transport === 'streamable_http'
  const rows: [string, ReactNode][] = http
    ? [['URL', <code>{server.url}</code>]]
    : [
        ['Command', server.command ? <code>{[server.command, ...(server.args ?? [])].join(' ')}</code> : <span className="muted">its own source (/sandbox/server.py)</span>],
        ['Dependencies', server.dependencies?.length ? <code>{server.dependencies.join(', ')}</code> : <span className="muted">none</span>],
        ['Network', server.network ? 'outbound access' : 'none'],
      ]
  rows.push(['Allowed tools', server.allowed_tools ? server.allowed_tools.join(', ') : <span className="muted">all it lists</span>])
  rows.push(['Timeout', `${server.timeout ?? 60} s per call`])
  return (
    <>
      <dl className="kv" data-testid="mcp-connection">
        {rows.map(([k, v]) => (
          <div key={k} className="kv-row"><dt>{k}</dt><dd>{v}</dd></div>
        ))}
      </dl>
      <h3>{http ? 'Headers' : 'Environment'}</h3>
      <Values values={(http ? server.headers : server.env) ?? {}} testId={http ? 'mcp-headers' : 'mcp-env'} />
    </>
  )
}

/** Header or environment values; a secret is shown as its reference, never as a value. */
function Values({ values, testId }: { values: Record<string, McpValue>; testId: string }) {
  const entries = Object.entries(values)
  if (!entries.length) return <p className="muted" data-testid={testId}>None.</p>
  return (
    <dl className="kv" data-testid={testId}>
      {entries.map(([k, v]) => (
        <div key={k} className="kv-row" data-testid="mcp-value" data-name={k}>
          <dt>{k}</dt>
          <dd>{isSecret(v) ? <><span className="pill marking" title="A stored secret: its value is never shown">secret</span> <code>{`{secret: ${v.secret}}`}</code></> : <code>{v}</code>}</dd>
        </div>
      ))}
    </dl>
  )
}

function Tools({ server }: { server: McpServer }) {
  const [refresh, setRefresh] = useState(0)
  const tools = useAsync(
    (s) => api.get<McpTools>(`${mcpPath(server.id)}/tools${refresh ? '?refresh=true' : ''}`, s),
    [server.id, refresh],
  )
  return (
    <>
      <p className="muted small">
        What the server offers agents (its allowed tools), as dhub last listed them.{' '}
        <button type="button" className="link-button" onClick={() => setRefresh((n) => n + 1)} disabled={tools.loading}>List them again now</button>
      </p>
      <ErrorBox error={toolsError(tools.error)} title="The tools cannot be listed" />
      {tools.loading && !tools.data ? (
        <Loading what="its tools" />
      ) : !tools.data || tools.error ? null : tools.data.data.length === 0 ? (
        <p className="muted">It offers no tools.</p>
      ) : (
        <table className="table" data-testid="mcp-tools">
          <thead>
            <tr><th>Name</th><th>Parameters</th><th>Description</th></tr>
          </thead>
          <tbody>
            {tools.data.data.map((t) => (
              <tr key={t.name} data-testid="mcp-tool-row" data-name={t.name}>
                <td data-label="Name"><code>{t.name}</code>{t.title && t.title !== t.name && <div className="muted small">{t.title}</div>}</td>
                <td data-label="Parameters"><code>{parametersOf(t)}</code></td>
                <td data-label="Description">{t.description}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  )
}

// -- a new server -------------------------------------------------------------------------

interface Row { name: string; value: string; secret: boolean }
interface FormState {
  name: string
  description: string
  transport: 'streamable_http' | 'stdio'
  url: string
  headers: Row[]
  command: string
  args: string
  env: Row[]
  allowed: string
  timeout: string
  /** What the document says that the form has no field for (source, dependencies, tags…). */
  extra: Record<string, unknown>
}

const FORM_KEYS = ['name', 'description', 'transport', 'url', 'headers', 'command', 'args', 'env', 'allowed_tools', 'timeout']
const EMPTY: FormState = {
  name: '', description: '', transport: 'streamable_http', url: '', headers: [], command: '', args: '',
  env: [], allowed: '', timeout: '60', extra: {},
}

function valuesOf(rows: Row[]): Record<string, McpValue> {
  return Object.fromEntries(rows.filter((r) => r.name.trim()).map((r) => [r.name.trim(), r.secret ? { secret: r.value.trim() } : r.value]))
}

function rowsOf(values: unknown): Row[] {
  if (!values || typeof values !== 'object') return []
  return Object.entries(values as Record<string, unknown>).map(([name, v]) =>
    isSecret(v) ? { name, value: v.secret, secret: true } : { name, value: String(v ?? ''), secret: false })
}

function documentOfForm(f: FormState): Record<string, unknown> {
  const allowed = f.allowed.split(/[\s,]+/).filter(Boolean)
  const timeout = Number(f.timeout)
  const transportFields = f.transport === 'streamable_http'
    ? { url: f.url.trim(), headers: valuesOf(f.headers) }
    : { ...(f.command.trim() ? { command: f.command.trim() } : {}), args: f.args.split('\n').filter((a) => a.trim()), env: valuesOf(f.env) }
  return {
    name: f.name.trim(), description: f.description, transport: f.transport, ...transportFields,
    allowed_tools: allowed.length ? allowed : null,
    ...(f.timeout.trim() ? { timeout: Number.isNaN(timeout) ? f.timeout : timeout } : {}),
    ...f.extra,
  }
}

function formOfDocument(doc: Record<string, unknown>): FormState {
  const text = (v: unknown) => (typeof v === 'string' ? v : '')
  return {
    name: text(doc.name), description: text(doc.description),
    transport: doc.transport === 'stdio' ? 'stdio' : 'streamable_http',
    url: text(doc.url), headers: rowsOf(doc.headers), command: text(doc.command),
    args: Array.isArray(doc.args) ? doc.args.join('\n') : '', env: rowsOf(doc.env),
    allowed: Array.isArray(doc.allowed_tools) ? doc.allowed_tools.join(', ') : '',
    timeout: doc.timeout === undefined ? '60' : String(doc.timeout),
    extra: Object.fromEntries(Object.entries(doc).filter(([k]) => !FORM_KEYS.includes(k))),
  }
}

function NewServer() {
  const [mode, setMode] = useState<'form' | 'yaml'>('form')
  const [form, setForm] = useState<FormState>(EMPTY)
  const [text, setText] = useState('')
  const [errors, setErrors] = useState<ErrorItem[]>([])
  const [problem, setProblem] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const set = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }))

  const switchTo = (to: 'form' | 'yaml') => {
    if (to === mode) return
    if (to === 'yaml') {
      setText(toYaml(documentOfForm(form), { lineWidth: 0 }))
    } else {
      const parsed = parseText(text, 'yaml')
      if (parsed.error || !parsed.value || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
        setProblem(`Fix the YAML first: ${parsed.error?.message ?? 'the document must be a mapping of fields.'}`)
        return
      }
      setForm(formOfDocument(parsed.value as Record<string, unknown>))
    }
    setProblem(null)
    setMode(to)
  }

  const create = async () => {
    let doc: Record<string, unknown>
    if (mode === 'yaml') {
      const parsed = parseText(text, 'yaml')
      if (parsed.error || !parsed.value || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
        setErrors([])
        setProblem(parsed.error?.message ?? 'The document must be a mapping of fields.')
        return
      }
      doc = parsed.value as Record<string, unknown>
    } else {
      doc = documentOfForm(form)
    }
    setBusy(true)
    try {
      const made = await api.post<McpServer>('/mcp-servers', doc)
      navigate(`/mcp-servers/${made.id}`)
    } catch (e) {
      setErrors(e instanceof ApiError ? e.errors : [])
      setProblem(errorText(e))
    } finally {
      setBusy(false)
    }
  }

  const marks = useMemo(
    () => (mode === 'yaml' ? errors.flatMap((e) => { const at = locate(text, e.loc); return at ? [{ line: at.line, message: `${e.loc}: ${e.message}` }] : [] }) : []),
    [mode, errors, text],
  )

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">New MCP server</span>} sub={<>How dhub reaches it; the fields are in docs/mcp.md. A value that is a secret is given as a stored secret's id and never shown. <a href={href('/mcp-servers')}>All MCP servers</a></>}>
        <fieldset className="segmented">
          <legend className="visually-hidden">Write it as</legend>
          {(['form', 'yaml'] as const).map((m) => (
            <label key={m} className={mode === m ? 'active' : ''}>
              <input type="radio" name="mcp-mode" value={m} checked={mode === m} onChange={() => switchTo(m)} />
              {m === 'form' ? 'Form' : 'YAML'}
            </label>
          ))}
        </fieldset>
        <button type="button" className="primary" onClick={() => void create()} disabled={busy}>{busy ? 'Creating…' : 'Create'}</button>
      </PageHeader>
      {problem && (
        <div className="error-box" role="alert" data-testid="mcp-problem">
          {problem}
          {errors.length > 0 && (
            <ul>{errors.map((e, i) => <li key={i} data-testid="field-error" data-loc={e.loc}><code>{e.loc || '/'}</code> {e.message}</li>)}</ul>
          )}
        </div>
      )}
      {mode === 'yaml' ? (
        <CodeEditor id="mcp-document" value={text} onChange={setText} marks={marks} label="MCP server document (YAML)" />
      ) : (
        <ServerForm form={form} set={set} onSubmit={() => void create()} />
      )}
    </section>
  )
}

function ServerForm({ form, set, onSubmit }: { form: FormState; set: (patch: Partial<FormState>) => void; onSubmit: () => void }) {
  const http = form.transport === 'streamable_http'
  const extra = Object.keys(form.extra)
  return (
    <form className="card form" noValidate aria-label="The MCP server" data-testid="mcp-form" onSubmit={(e) => { e.preventDefault(); onSubmit() }}>
      <div className="field">
        <label htmlFor="mcp-name">Name</label>
        <input id="mcp-name" value={form.name} onChange={(e) => set({ name: e.target.value })} placeholder="github" required />
      </div>
      <div className="field">
        <label htmlFor="mcp-description">Description</label>
        <input id="mcp-description" value={form.description} onChange={(e) => set({ description: e.target.value })} />
      </div>
      <fieldset className="field">
        <legend>Transport</legend>
        <label className="choice inline"><input type="radio" name="mcp-transport" checked={http} onChange={() => set({ transport: 'streamable_http' })} /> <span>Streamable HTTP (a URL)</span></label>
        <label className="choice inline"><input type="radio" name="mcp-transport" checked={!http} onChange={() => set({ transport: 'stdio' })} /> <span>stdio (a program dhub starts in its sandbox)</span></label>
      </fieldset>
      {http ? (
        <>
          <div className="field">
            <label htmlFor="mcp-url">URL</label>
            <input id="mcp-url" value={form.url} onChange={(e) => set({ url: e.target.value })} placeholder="https://mcp.example.com/mcp" />
          </div>
          <RowsField label="Headers" idPrefix="mcp-header" rows={form.headers} onChange={(headers) => set({ headers })} />
        </>
      ) : (
        <>
          <div className="field">
            <label htmlFor="mcp-command">Command</label>
            <input id="mcp-command" value={form.command} onChange={(e) => set({ command: e.target.value })} placeholder="python" />
            <p className="hint">The sandbox's Python (with the dependencies, in YAML), a dependency's console script, or a program under /usr.</p>
          </div>
          <div className="field">
            <label htmlFor="mcp-args">Arguments, one per line</label>
            <textarea id="mcp-args" rows={3} value={form.args} onChange={(e) => set({ args: e.target.value })} />
          </div>
          <RowsField label="Environment" idPrefix="mcp-env" rows={form.env} onChange={(env) => set({ env })} />
        </>
      )}
      <div className="field">
        <label htmlFor="mcp-allowed">Allowed tools</label>
        <input id="mcp-allowed" value={form.allowed} onChange={(e) => set({ allowed: e.target.value })} placeholder="all it lists" />
        <p className="hint">Names separated by commas; empty: every tool the server lists.</p>
      </div>
      <div className="field">
        <label htmlFor="mcp-timeout">Timeout (seconds per call)</label>
        <input id="mcp-timeout" inputMode="decimal" value={form.timeout} onChange={(e) => set({ timeout: e.target.value })} />
      </div>
      {extra.length > 0 && <p className="muted small" data-testid="mcp-extra">Also from the YAML: {extra.join(', ')}.</p>}
    </form>
  )
}

/** Name and value pairs (headers, environment); a value marked secret is a secret's id. */
function RowsField({ label, idPrefix, rows, onChange }: { label: string; idPrefix: string; rows: Row[]; onChange: (rows: Row[]) => void }) {
  const change = (i: number, patch: Partial<Row>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)))
  return (
    <fieldset className="field">
      <legend>{label}</legend>
      {rows.map((r, i) => (
        <div key={i} className="row wrap mcp-form-row" data-testid={`${idPrefix}-row`}>
          <input aria-label={`${label}: name ${i + 1}`} value={r.name} onChange={(e) => change(i, { name: e.target.value })} placeholder="name" />
          <input aria-label={`${label}: ${r.secret ? 'secret id' : 'value'} ${i + 1}`} className="grow" value={r.value}
            onChange={(e) => change(i, { value: e.target.value })} placeholder={r.secret ? 'secret.…' : 'value'} />
          <label className="choice inline"><input type="checkbox" checked={r.secret} onChange={(e) => change(i, { secret: e.target.checked })} /> <span>secret</span></label>
          <button type="button" className="link-button" onClick={() => onChange(rows.filter((_, j) => j !== i))}>Remove</button>
        </div>
      ))}
      <button type="button" onClick={() => onChange([...rows, { name: '', value: '', secret: false }])}>Add {label === 'Headers' ? 'a header' : 'a variable'}</button>
      <p className="hint">Mark a value secret to give a stored secret's id: dhub reveals it only when it connects, and no answer shows it.</p>
    </fieldset>
  )
}
