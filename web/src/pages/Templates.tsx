// Templates (docs/templates.md): the list, and one template's variables and body with a form
// that renders it: the text on the page, or a download as HTML or PDF; its sharing and
// versions. New and Edit are TemplateEditor.

import { useMemo, useState } from 'react'
import { ApiError, api, downloadPost, saveBlob } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { FieldInput, initialText, valueOf } from '../components/FieldInput'
import type { FieldSpec } from '../components/FieldInput'
import { DeleteButton, Flashed, SharingAndVersions } from '../components/ResourceSections'
import { takeFlash } from '../flash'
import { everything } from '../folders'
import { splitPointer } from '../pointer'
import type { Owned } from '../resource'
import { href } from '../router'
import { can, useScopeOn } from '../scope'
import { errorText, useAsync } from '../util'
import { MarkingBadges } from './Folders'
import { TemplateEditor } from './TemplateEditor'

interface Variable { name: string; type: string; description?: string; required?: boolean; default?: unknown }
interface TemplateDoc extends Owned { format: 'markdown' | 'html' | 'text'; body: string; variables: Variable[] }
interface Rendered { template_id: string; version: number; format: string; media_type: string; text: string }
type Output = 'source' | 'html' | 'pdf'

const base = (id: string) => `/templates/${encodeURIComponent(id)}`

export function TemplatesPage({ templateId, sub }: { templateId: string | null; sub?: string | null }) {
  if (templateId === 'new') return <TemplateEditor templateId={null} />
  if (templateId && sub === 'edit') return <TemplateEditor templateId={templateId} />
  return templateId ? <TemplateView key={templateId} templateId={templateId} /> : <TemplateList />
}

/** Every template the caller can see. */
function TemplateList() {
  const list = useAsync((s) => everything('/templates', s) as Promise<TemplateDoc[]>, [])
  const [flashed] = useState(() => takeFlash('/templates'))
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Templates</span>} sub="Documents with typed variables that agents and workflows render.">
        <a className="button primary" href={href('/templates/new')}>New template</a>
      </PageHeader>
      <Flashed text={flashed} />
      <ErrorBox error={list.error} />
      {!list.data ? (
        <Loading what="templates" />
      ) : list.data.length === 0 ? (
        <p className="muted">No templates that you can see.</p>
      ) : (
        <table className="table" data-testid="templates">
          <thead>
            <tr><th>Name</th><th>Format</th><th>Variables</th><th>Markings</th></tr>
          </thead>
          <tbody>
            {list.data.map((t) => (
              <tr key={t.id} data-testid="template-row" data-name={t.name}>
                <td data-label="Name"><a href={href(`/templates/${t.id}`)}>{t.alias || t.name}</a></td>
                <td data-label="Format">{t.format}</td>
                <td data-label="Variables">{(t.variables ?? []).map((v) => v.name).join(', ')}</td>
                <td data-label="Markings"><span><MarkingBadges markings={t.effective_markings} /></span></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

/** One template: what it is, its variables, its body, and the render form. */
function TemplateView({ templateId }: { templateId: string }) {
  const template = useAsync((s) => api.get<TemplateDoc>(base(templateId), s), [templateId])
  const [flashed] = useState(() => takeFlash(templateId))
  const t = template.data
  const scope = useScopeOn(base(templateId), t)
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{t ? t.alias || t.name : 'Template'}</span>} sub={t?.description}>
        <a className="button" href={href('/templates')}>All templates</a>
        {t && can(scope, 'edit') && <a className="button" href={href(`/templates/${t.id}/edit`)}>Edit</a>}
        {t && can(scope, 'share') && <DeleteButton path={base(t.id)} resource={t} noun="template" listPath="/templates" />}
      </PageHeader>
      <Flashed text={flashed} />
      <ErrorBox error={template.error} title="This template cannot be shown" />
      {!t ? (
        !template.error && <Loading what="the template" />
      ) : (
        <>
          <div className="meta">
            <code>{t.id}</code> <span className="pill">version {t.version}</span> <span className="pill">{t.format}</span>
            <MarkingBadges markings={t.effective_markings} />
          </div>
          <h2>Variables</h2>
          <Variables variables={t.variables} />
          <h2>Body</h2>
          <pre className="json source" data-testid="template-body" aria-label="The template's body" tabIndex={0}>{t.body}</pre>
          <h2>Render</h2>
          <RenderForm template={t} />
          <SharingAndVersions scope={scope} path={base(t.id)} resource={t} noun="template" onChanged={template.reload} />
        </>
      )}
    </section>
  )
}

function Variables({ variables }: { variables: Variable[] }) {
  if (!variables.length) return <p className="muted">None: the body is rendered as it is.</p>
  return (
    <table className="table" data-testid="template-variables">
      <thead>
        <tr><th>Name</th><th>Type</th><th>Required</th><th>Description</th></tr>
      </thead>
      <tbody>
        {variables.map((v) => (
          <tr key={v.name} data-testid="template-variable" data-name={v.name}>
            <td data-label="Name"><code>{v.name}</code></td>
            <td data-label="Type">{v.type}</td>
            <td data-label="Required">
              <span>{v.required !== false ? 'yes' : <>no{v.default !== undefined && <>, default <code>{JSON.stringify(v.default)}</code></>}</>}</span>
            </td>
            <td data-label="Description">{v.description}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

/** The variables' fields; Render shows the text, the buttons download it as HTML or PDF. A
 * server error naming /variables/NAME goes beside that field, any other in the ErrorBox. */
function RenderForm({ template }: { template: TemplateDoc }) {
  const fields = useMemo<FieldSpec[]>(
    () => template.variables.map((v) => ({ ...v, required: v.required !== false })),
    [template],
  )
  const [texts, setTexts] = useState<Record<string, string>>(() => Object.fromEntries(fields.map((f) => [f.name, initialText(f)])))
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<unknown>(null)
  const [busy, setBusy] = useState<Output | null>(null)
  const [rendered, setRendered] = useState<Rendered | null>(null)

  const focus = (name: string | undefined) => name && document.getElementById(`render-${name}`)?.focus()

  /** The values to send, or null (with the fields' messages shown) when one does not fit. */
  const values = (): Record<string, unknown> | null => {
    const out: Record<string, unknown> = {}
    const local: Record<string, string> = {}
    for (const f of fields) {
      try {
        const v = valueOf(f, texts[f.name] ?? '')
        if (v !== undefined) out[f.name] = v
      } catch (exc) {
        local[f.name] = errorText(exc)
      }
    }
    setErrors(local)
    setGeneral(null)
    focus(Object.keys(local)[0])
    return Object.keys(local).length ? null : out
  }

  const failed = (exc: unknown) => {
    const byField: Record<string, string> = {}
    const other = exc instanceof ApiError ? exc.errors.filter((item) => {
      const [head, name, ...deeper] = splitPointer(item.loc)
      if (head !== 'variables' || !name || deeper.length || !fields.some((f) => f.name === name)) return true
      byField[name] = byField[name] ? `${byField[name]} ${item.message}` : item.message
      return false
    }) : []
    setErrors(byField)
    // Anything not beside a field (a limit tripped, a network failure) goes in the ErrorBox.
    const placed = Object.keys(byField).length > 0
    setGeneral(!placed || other.length ? exc : null)
    focus(Object.keys(byField)[0])
  }

  const run = async (output: Output) => {
    const variables = values()
    if (!variables) return
    const body = { variables, output, version: template.version }
    const path = `${base(template.id)}/render`
    setBusy(output)
    try {
      if (output === 'pdf') {
        await downloadPost(path, body, `${template.name}.pdf`)
      } else if (output === 'html') {
        const page = await api.post<Rendered>(path, body)
        saveBlob(new Blob([page.text], { type: 'text/html' }), `${template.name}.html`)
      } else {
        setRendered(await api.post<Rendered>(path, body))
      }
    } catch (exc) {
      setRendered(null)
      failed(exc)
    } finally {
      setBusy(null)
    }
  }

  return (
    <>
      <form className="card form" noValidate data-testid="render-form" aria-label="Render the template"
        onSubmit={(e) => { e.preventDefault(); void run('source') }}>
        {fields.length === 0 && <p className="muted">This template takes no variables.</p>}
        {fields.map((f) => (
          <FieldInput
            key={f.name}
            idPrefix="render"
            field={f}
            value={texts[f.name] ?? ''}
            onChange={(v) => setTexts((x) => ({ ...x, [f.name]: v }))}
            error={errors[f.name]}
          />
        ))}
        <ErrorBox error={general} title="Cannot render" />
        <div className="render-actions">
          <button type="submit" className="primary" disabled={busy !== null}>{busy === 'source' ? 'Rendering…' : 'Render'}</button>
          <button type="button" disabled={busy !== null} onClick={() => void run('html')}>{busy === 'html' ? 'Rendering…' : 'Download HTML'}</button>
          <button type="button" disabled={busy !== null} onClick={() => void run('pdf')}>{busy === 'pdf' ? 'Rendering…' : 'Download PDF'}</button>
        </div>
      </form>
      {rendered && (
        <>
          <h3>Rendered <span className="muted small">({rendered.format}, version {rendered.version})</span></h3>
          <pre className="json source" data-testid="rendered-text" aria-label="The rendered text" tabIndex={0}>{rendered.text}</pre>
        </>
      )}
    </>
  )
}
