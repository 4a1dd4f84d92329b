import { useEffect, useMemo, useRef, useState } from 'react'
import { stringify as toYaml } from 'yaml'
import { ApiError, api, documentOf, replacementPatch } from '../api'
import { CodeEditor } from '../components/CodeEditor'
import type { CodeEditorHandle, Mark } from '../components/CodeEditor'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { McpToolsPicker } from '../components/McpToolsPicker'
import { withToolsItem } from '../mcp'
import { locate, parseText, splitPointer } from '../pointer'
import { flash } from '../flash'
import { href, navigate, releaseLeaveGuard, useLeaveGuard } from '../router'
import { SCOPE_TEXT, can, useMyScope } from '../scope'
import type { Route } from '../router'
import type { Agent, ErrorItem, Example } from '../types'
import { errorText } from '../util'

type Format = 'json' | 'yaml'

const NEW_AGENT = {
  name: 'my-agent',
  description: 'What this agent does.',
  mode: 'workflow',
  input_mode: 'event',
  nodes: [
    { id: 'start', type: 'start', config: { variables: [{ name: 'text', type: 'string' }] } },
    { id: 'shout', type: 'template', config: { template: '{{ text | upper }}', output: 'loud' } },
    { id: 'end', type: 'end', config: { outputs: [{ name: 'loud', type: 'string', value: '{{ loud }}' }] } },
  ],
  edges: [
    { source: 'start', target: 'shout' },
    { source: 'shout', target: 'end' },
  ],
}

function render(value: unknown, format: Format): string {
  return format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : toYaml(value, { lineWidth: 0 })
}

interface Located extends ErrorItem {
  line: number | null
  exact: boolean
}

export function AgentEditorPage({ agentId, route }: { agentId: string | null; route: Route }) {
  const exampleFile = route.params.get('example')
  const fromVersion = route.params.get('version')
  const [stored, setStored] = useState<Agent | null>(null)
  const [format, setFormat] = useState<Format>('json')
  const [text, setText] = useState<string | null>(null)
  const [savedDoc, setSavedDoc] = useState<string | null>(null) // as loaded or saved, as JSON
  const [loadError, setLoadError] = useState<unknown>(null)
  const [errors, setErrors] = useState<ErrorItem[]>([])
  const [problem, setProblem] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const editor = useRef<CodeEditorHandle>(null)
  const errorHeading = useRef<HTMLHeadingElement>(null)

  useEffect(() => {
    const controller = new AbortController()
    const load = async () => {
      if (agentId) {
        const agent = await api.get<Agent>(`/agents/${agentId}`, controller.signal)
        // Editing from an old version: its document, saved over the current one (a rollback).
        const source = fromVersion
          ? await api.get<Agent>(`/agents/${agentId}/versions/${fromVersion}`, controller.signal)
          : agent
        setStored(agent)
        setText(render(documentOf(source), 'json'))
        setSavedDoc(JSON.stringify(documentOf(source)))
      } else if (exampleFile) {
        const examples = await api.get<{ data: Example[] }>('/examples', controller.signal)
        const example = examples.data.find((e) => e.file === exampleFile)
        if (!example) throw new Error(`The server offers no example ${exampleFile}.`)
        const yamlFile = /\.ya?ml$/.test(example.file)
        setFormat(yamlFile ? 'yaml' : 'json')
        setText(render(example.document, yamlFile ? 'yaml' : 'json'))
        setSavedDoc(JSON.stringify(example.document))
      } else {
        setText(render(NEW_AGENT, 'json'))
        setSavedDoc(JSON.stringify(NEW_AGENT))
      }
    }
    load().catch((e) => !controller.signal.aborted && setLoadError(e))
    return () => controller.abort()
  }, [agentId, exampleFile, fromVersion])

  const located: Located[] = useMemo(() => {
    if (text === null) return []
    return errors.map((e) => {
      const where = locate(text, e.loc)
      return { ...e, line: where?.line ?? null, exact: where?.exact ?? false }
    })
  }, [errors, text])

  const marks: Mark[] = useMemo(() => {
    const out: Mark[] = located.filter((e) => e.line !== null).map((e) => ({ line: e.line!, message: `${e.loc}: ${e.message}` }))
    return out
  }, [located])
  const [syntaxLine, setSyntaxLine] = useState<number | null>(null)
  // Unsaved: the document differs from what was loaded or saved (switching between JSON and
  // YAML, or indenting differently, changes nothing; text that does not parse is a change).
  const current = useMemo(() => (text === null ? null : documentText(text, format)), [text, format])
  const dirty = current !== null && savedDoc !== null && current !== savedDoc
  useLeaveGuard(dirty ? 'Leave the editor? Your changes to this document are not saved.' : null)
  const scope = useMyScope(stored ?? undefined)

  if (loadError) return <ErrorBox error={loadError} title="The document cannot be loaded" />
  if (text === null) return <Loading what="the document" />

  const parse = (): Record<string, unknown> | null => {
    const result = parseText(text, format)
    if (result.error) {
      setErrors([])
      setProblem(result.error.message)
      setSyntaxLine(result.error.line)
      if (result.error.line) editor.current?.goToLine(result.error.line)
      return null
    }
    setSyntaxLine(null)
    if (!result.value || typeof result.value !== 'object' || Array.isArray(result.value)) {
      setErrors([])
      setProblem('The document must be an object (a mapping of fields).')
      return null
    }
    return result.value as Record<string, unknown>
  }

  const showErrors = (items: ErrorItem[], detail: string | null) => {
    setErrors(items)
    setProblem(items.length ? null : detail)
    setStatus(null)
    const first = items.map((e) => locate(text, e.loc)?.line).find((l) => l !== undefined)
    window.setTimeout(() => {
      errorHeading.current?.focus({ preventScroll: true })
      if (first) editor.current?.showLine(first)
    }, 0)
  }

  const switchFormat = (to: Format) => {
    if (to === format) return
    const result = parseText(text, format)
    if (result.error) {
      setProblem(`Fix the ${format.toUpperCase()} first: ${result.error.message}`)
      return
    }
    setFormat(to)
    setText(render(result.value, to))
  }

  const validate = async () => {
    const doc = parse()
    if (!doc) return
    setBusy(true)
    try {
      const result = await api.post<{ valid: boolean; errors: ErrorItem[] }>('/agents/validate', doc)
      if (result.valid) {
        setErrors([])
        setProblem(null)
        setStatus('The document is valid.')
      } else {
        showErrors(result.errors, null)
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) showErrors(e.errors, e.detail)
      else showErrors([], errorText(e))
    } finally {
      setBusy(false)
    }
  }

  const save = async () => {
    const doc = parse()
    if (!doc) return
    setBusy(true)
    setStatus(null)
    try {
      if (stored) {
        const updated = await api.patch<Agent>(`/agents/${stored.id}`, replacementPatch(stored as never, doc))
        setErrors([])
        setProblem(null)
        setSavedDoc(JSON.stringify(doc))
        if (updated.version === stored.version) {
          setStatus(`Nothing changed: still version ${updated.version}.`)
        } else {
          flash(updated.id, `Saved, version ${updated.version}.`)
          releaseLeaveGuard()
          navigate(`/agents/${updated.id}`)
        }
        setStored(updated)
      } else {
        const created = await api.post<Agent>('/agents', doc)
        setSavedDoc(JSON.stringify(doc))
        flash(created.id, `Created ${created.name}, version ${created.version}.`)
        releaseLeaveGuard()
        navigate(`/agents/${created.id}`)
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) showErrors(e.errors, e.detail)
      else showErrors([], errorText(e))
    } finally {
      setBusy(false)
    }
  }

  /** The picker's item put in the document's agent.tools (replacing the same server's). */
  const addMcpTools = (item: string | Record<string, unknown>, what: string) => {
    const doc = parse()
    if (!doc) return
    try {
      setText(render(withToolsItem(doc, item), format))
      setErrors([])
      setProblem(null)
      setStatus(`Added ${what} to agent.tools: ${stored ? 'save' : 'create'} to keep it.`)
    } catch (e) {
      setStatus(null)
      setProblem(errorText(e))
    }
  }

  const title = stored ? `Edit ${stored.alias || stored.name}${fromVersion ? ` from version ${fromVersion}` : ''}` : exampleFile ? `New agent from ${exampleFile}` : 'New agent'
  const fieldName = (loc: string) => splitPointer(loc).at(-1) ?? '(the document)'

  return (
    <section aria-labelledby="page-title" className="editor-page">
      <PageHeader
        title={<span id="page-title">{title}</span>}
        sub={stored ? <>Saving stores version {stored.version + 1} if anything changed. <a href={href(`/agents/${stored.id}`)}>Back to the agent</a></> : 'JSON or YAML; the document format is in docs/resource-model.md.'}
      >
        <fieldset className="segmented">
          <legend className="visually-hidden">Format</legend>
          {(['json', 'yaml'] as Format[]).map((f) => (
            <label key={f} className={format === f ? 'active' : ''}>
              <input type="radio" name="format" value={f} checked={format === f} onChange={() => switchFormat(f)} />
              {f.toUpperCase()}
            </label>
          ))}
        </fieldset>
        <button type="button" onClick={validate} disabled={busy}>Validate</button>
        <button type="button" className="primary" onClick={save} disabled={busy || (stored !== null && scope !== null && !can(scope, 'edit'))}>{stored ? 'Save' : 'Create'}</button>
      </PageHeader>

      {stored && scope !== null && !can(scope, 'edit') && (
        <p className="notice" data-testid="scope-notice">Your access is {SCOPE_TEXT[scope]}: saving will be refused.</p>
      )}
      <div aria-live="polite">
        {status && <p className="success" role="status" data-testid="editor-status">{status}</p>}
        {dirty && !status && <p className="muted small" data-testid="unsaved">Unsaved changes.</p>}
      </div>
      {problem && (
        <div className="error-box" role="alert" data-testid="editor-problem">
          {problem}
          {syntaxLine && (
            <> <button type="button" className="link-button" onClick={() => editor.current?.goToLine(syntaxLine)}>Go to line {syntaxLine}</button></>
          )}
        </div>
      )}
      {located.length > 0 && (
        <div className="error-list" data-testid="error-list">
          <h2 tabIndex={-1} ref={errorHeading} id="editor-errors">
            {located.length === 1 ? '1 problem' : `${located.length} problems`} in the document
          </h2>
          <ul>
            {located.map((e, i) => (
              <li key={i} data-testid="field-error" data-loc={e.loc} data-line={e.line ?? ''} data-code={e.code}>
                {e.line !== null ? (
                  <button type="button" className="link-button" onClick={() => editor.current?.goToLine(e.line!)}>
                    line {e.line}
                  </button>
                ) : null}{' '}
                <code className="loc">{e.loc || '/'}</code>{' '}
                <span className="muted small">({e.exact ? `field ${fieldName(e.loc)}` : `${fieldName(e.loc)} is missing here`})</span>
                <div className="message">{e.message}</div>
              </li>
            ))}
          </ul>
        </div>
      )}
      <McpToolsPicker onAdd={addMcpTools} />
      <CodeEditor
        ref={editor}
        id="agent-document"
        value={text}
        onChange={(v) => {
          setText(v)
          setStatus(null)
        }}
        marks={syntaxLine ? [...marks, { line: syntaxLine, message: problem ?? '' }] : marks}
        label={`Agent document (${format.toUpperCase()})`}
        describedBy={located.length ? 'editor-errors' : undefined}
      />
    </section>
  )
}

/** The document the text holds, as JSON text; the text itself when it does not parse. */
function documentText(text: string, format: Format): string {
  const parsed = parseText(text, format)
  return parsed.error ? `unparsed:${text}` : JSON.stringify(parsed.value)
}
