// A template written in the console (docs/templates.md): new, or an edit of a stored one,
// from a form (name, format, the body in the code editor, typed variables) or as YAML. The
// server checks it (the body parses, uses only its variables…) and points at what is wrong:
// beside the field in the form, on the line in the YAML. Leaving with unsaved changes asks.

import { useMemo, useState } from 'react'
import { stringify as toYaml } from 'yaml'
import { ApiError, api, documentOf, replacementPatch } from '../api'
import { CodeEditor } from '../components/CodeEditor'
import type { Mark } from '../components/CodeEditor'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { flash } from '../flash'
import { locate, parseText, placeErrors } from '../pointer'
import type { Owned } from '../resource'
import { href, navigate, releaseLeaveGuard, useLeaveGuard } from '../router'
import { can, useScopeOn } from '../scope'
import type { Agent, ErrorItem } from '../types'
import { useAsync } from '../util'

const FORMATS = ['markdown', 'html', 'text'] as const
const VARIABLE_TYPES = ['string', 'number', 'integer', 'boolean', 'date', 'datetime', 'object', 'array'] as const
const FORM_KEYS = ['name', 'description', 'format', 'body', 'variables']

interface VariableRow { name: string; type: string; required: boolean; default: string; description: string }
interface FormState {
  name: string
  description: string
  format: (typeof FORMATS)[number]
  body: string
  variables: VariableRow[]
  /** What the document says that the form has no field for (tags, folder_id…). */
  extra: Record<string, unknown>
}
type Doc = Record<string, unknown>

const EMPTY: FormState = { name: '', description: '', format: 'markdown', body: '', variables: [], extra: {} }

function defaultValue(row: VariableRow): unknown {
  if (row.type === 'string' || row.type === 'date' || row.type === 'datetime') return row.default
  try {
    return JSON.parse(row.default)
  } catch {
    return row.default // the server says what it wants
  }
}

export function documentOfForm(f: FormState): Doc {
  const variables = f.variables.map((v) => {
    const hasDefault = v.default.trim() !== ''
    return {
      name: v.name.trim(), type: v.type,
      ...(v.description ? { description: v.description } : {}),
      ...(hasDefault ? { default: defaultValue(v) } : {}),
      // Required unless it has a default: said only when it is otherwise.
      ...(v.required === hasDefault ? { required: v.required } : {}),
    }
  })
  return { name: f.name.trim(), description: f.description, format: f.format, body: f.body, variables, ...f.extra }
}

export function formOfDocument(doc: Doc): FormState {
  const text = (v: unknown) => (typeof v === 'string' ? v : '')
  const variables = Array.isArray(doc.variables) ? (doc.variables as Doc[]) : []
  return {
    name: text(doc.name), description: text(doc.description), body: text(doc.body),
    format: FORMATS.includes(doc.format as FormState['format']) ? (doc.format as FormState['format']) : 'markdown',
    variables: variables.map((v) => ({
      name: text(v.name), type: text(v.type) || 'string', description: text(v.description),
      required: typeof v.required === 'boolean' ? v.required : v.default === undefined,
      default: v.default === undefined ? '' : typeof v.default === 'string' ? v.default : JSON.stringify(v.default),
    })),
    // Nulls (no alias, no folder) say nothing: left out, the patch leaves them null.
    extra: Object.fromEntries(Object.entries(doc).filter(([k, v]) => !FORM_KEYS.includes(k) && v !== null)),
  }
}

/** `templateId` null: a new template. */
export function TemplateEditor({ templateId }: { templateId: string | null }) {
  const path = templateId ? `/templates/${encodeURIComponent(templateId)}` : null
  const stored = useAsync((s) => (path ? api.get<Owned & Doc>(path, s) : Promise.resolve(null)), [path])
  if (stored.error) return <ErrorBox error={stored.error} title="This template cannot be edited" />
  if (stored.data === undefined) return <Loading what="the template" />
  return <Editor stored={stored.data} />
}

function Editor({ stored }: { stored: (Owned & Doc) | null }) {
  const initial = useMemo(() => (stored ? formOfDocument(documentOf(stored as unknown as Agent)) : EMPTY), [stored])
  const [mode, setMode] = useState<'form' | 'yaml'>('form')
  const [form, setForm] = useState<FormState>(initial)
  const [text, setText] = useState('')
  const [errors, setErrors] = useState<ErrorItem[]>([])
  const [byField, setByField] = useState<Record<string, string>>({})
  const [problem, setProblem] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const scope = useScopeOn(stored ? `/templates/${stored.id}` : null, stored ?? undefined)
  const set = (patch: Partial<FormState>) => setForm((f) => ({ ...f, ...patch }))

  /** The document being written, or an error message when the YAML does not read as one. */
  const current = (): Doc | string => {
    if (mode === 'form') return documentOfForm(form)
    const parsed = parseText(text, 'yaml')
    if (parsed.error) return parsed.error.message
    if (!parsed.value || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) return 'The document must be a mapping of fields.'
    return parsed.value as Doc
  }
  const now = current()
  const dirty = JSON.stringify(now) !== JSON.stringify(documentOfForm(initial))
  useLeaveGuard(dirty && !busy ? 'Leave the editor? Your changes to this template are not saved.' : null)

  const switchTo = (to: 'form' | 'yaml') => {
    if (to === mode) return
    if (to === 'yaml') {
      setText(toYaml(documentOfForm(form), { lineWidth: 0 }))
    } else {
      if (typeof now === 'string') {
        setProblem(`Fix the YAML first: ${now}`)
        return
      }
      setForm(formOfDocument(now))
    }
    setProblem(null)
    setErrors([])
    setByField({})
    setMode(to)
  }

  const save = async () => {
    if (typeof now === 'string') {
      setErrors([])
      setProblem(now)
      return
    }
    setBusy(true)
    try {
      let saved: Owned
      if (stored) {
        saved = await api.patch<Owned>(`/templates/${stored.id}`, replacementPatch(stored, now))
        flash(saved.id, saved.version === stored.version ? 'No change to save.' : `Saved, version ${saved.version}.`)
      } else {
        saved = await api.post<Owned>('/templates', now)
        flash(saved.id, `Created the template ${saved.name}.`)
      }
      releaseLeaveGuard()
      navigate(`/templates/${saved.id}`)
    } catch (exc) {
      setBusy(false)
      setErrors(exc instanceof ApiError ? exc.errors : [])
      const placed = placeErrors(exc, ([head, i]) => {
        if (mode === 'yaml') return null
        if (head === 'name' || head === 'format' || head === 'body' || head === 'description') return head
        if (head === 'variables') return i === undefined ? 'variables' : `variable-${i}`
        return null
      })
      setByField(placed.byField)
      setProblem(placed.rest)
    }
  }

  const yamlMarks = useMemo<Mark[]>(
    () => (mode === 'yaml' ? errors.flatMap((e) => { const at = locate(text, e.loc); return at ? [{ line: at.line, message: `${e.loc}: ${e.message}` }] : [] }) : []),
    [mode, errors, text],
  )
  const title = stored ? `Edit: ${stored.alias || stored.name}` : 'New template'
  const back = stored ? href(`/templates/${stored.id}`) : href('/templates')

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{title}</span>} sub={<>The body is Jinja2 and may use only the variables declared (docs/templates.md). <a href={back}>{stored ? 'Back to the template' : 'All templates'}</a></>}>
        <fieldset className="segmented">
          <legend className="visually-hidden">Write it as</legend>
          {(['form', 'yaml'] as const).map((m) => (
            <label key={m} className={mode === m ? 'active' : ''}>
              <input type="radio" name="template-mode" value={m} checked={mode === m} onChange={() => switchTo(m)} />
              {m === 'form' ? 'Form' : 'YAML'}
            </label>
          ))}
        </fieldset>
        <button type="button" className="primary" onClick={() => void save()} disabled={busy || (stored !== null && scope !== null && !can(scope, 'edit'))}>
          {busy ? 'Saving…' : stored ? 'Save' : 'Create'}
        </button>
      </PageHeader>
      {stored && scope !== null && !can(scope, 'edit') && <p className="notice">You may read this template, not change it.</p>}
      <div data-testid="template-problem"><ErrorBox error={problem} title={stored ? 'Not saved' : 'Not created'} /></div>
      {mode === 'yaml' ? (
        <CodeEditor id="template-document" value={text} onChange={setText} marks={yamlMarks} label="Template document (YAML)" />
      ) : (
        <TemplateForm form={form} set={set} errors={byField} onSubmit={() => void save()} />
      )}
    </section>
  )
}

function FieldError({ id, text }: { id: string; text?: string }) {
  return text ? <p className="field-error" id={`${id}-error`} data-testid={`error-${id}`}>{text}</p> : null
}

/** A body error names its line ("Line 3: unexpected '}'"): mark it in the editor. */
function bodyMarks(message: string | undefined): Mark[] {
  const line = message ? /Line (\d+)/.exec(message) : null
  return line && message ? [{ line: Number(line[1]), message }] : []
}

function TemplateForm({ form, set, errors, onSubmit }: { form: FormState; set: (p: Partial<FormState>) => void; errors: Record<string, string>; onSubmit: () => void }) {
  const change = (i: number, patch: Partial<VariableRow>) => set({ variables: form.variables.map((v, j) => (j === i ? { ...v, ...patch } : v)) })
  const extra = Object.keys(form.extra).filter((k) => k !== 'category')
  return (
    <form className="card form wide" noValidate aria-label="The template" data-testid="template-form" onSubmit={(e) => { e.preventDefault(); onSubmit() }}>
      <div className={`field${errors.name ? ' has-error' : ''}`}>
        <label htmlFor="template-name">Name</label>
        <input id="template-name" value={form.name} onChange={(e) => set({ name: e.target.value })} placeholder="weekly-report" aria-invalid={errors.name ? true : undefined} />
        <FieldError id="name" text={errors.name} />
      </div>
      <div className="field">
        <label htmlFor="template-description">Description</label>
        <input id="template-description" value={form.description} onChange={(e) => set({ description: e.target.value })} />
      </div>
      <div className={`field${errors.format ? ' has-error' : ''}`}>
        <label htmlFor="template-format">Format</label>
        <select id="template-format" value={form.format} onChange={(e) => set({ format: e.target.value as FormState['format'] })}>
          {FORMATS.map((f) => <option key={f} value={f}>{f}</option>)}
        </select>
        <FieldError id="format" text={errors.format} />
      </div>
      <fieldset className="field" data-testid="template-variables-form">
        <legend>Variables</legend>
        {form.variables.map((v, i) => (
          <div key={i} data-testid="variable-row">
            <div className="row wrap controls-row">
              <input aria-label={`Variable ${i + 1}: name`} value={v.name} onChange={(e) => change(i, { name: e.target.value })} placeholder="name" />
              <select aria-label={`Variable ${i + 1}: type`} value={v.type} onChange={(e) => change(i, { type: e.target.value })}>
                {VARIABLE_TYPES.map((t) => <option key={t} value={t}>{t}</option>)}
              </select>
              <label className="choice inline"><input type="checkbox" aria-label={`Variable ${i + 1}: required`} checked={v.required} onChange={(e) => change(i, { required: e.target.checked })} /> <span>required</span></label>
              {/* A default makes it optional (the server refuses both): typing one unticks required. */}
              <input aria-label={`Variable ${i + 1}: default`} value={v.default} placeholder="default (optional)"
                onChange={(e) => change(i, { default: e.target.value, ...(e.target.value.trim() && !v.default.trim() ? { required: false } : {}) })} />
              <input aria-label={`Variable ${i + 1}: description`} value={v.description} onChange={(e) => change(i, { description: e.target.value })} placeholder="description" />
              <button type="button" className="link-button" onClick={() => set({ variables: form.variables.filter((_, j) => j !== i) })}>Remove</button>
            </div>
            <FieldError id={`variable-${i}`} text={errors[`variable-${i}`]} />
          </div>
        ))}
        <button type="button" onClick={() => set({ variables: [...form.variables, { name: '', type: 'string', required: true, default: '', description: '' }] })}>Add a variable</button>
        <FieldError id="variables" text={errors.variables} />
      </fieldset>
      <div className={`field${errors.body ? ' has-error' : ''}`}>
        <label htmlFor="template-body">Body</label>
        <CodeEditor id="template-body" value={form.body} onChange={(body) => set({ body })} marks={bodyMarks(errors.body)} label="Body" describedBy={errors.body ? 'body-error' : undefined} />
        <FieldError id="body" text={errors.body} />
      </div>
      {extra.length > 0 && <p className="muted small" data-testid="template-extra">Also in the document: {extra.join(', ')}.</p>}
    </form>
  )
}
