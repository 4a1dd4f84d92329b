// Ontologies written in the console (docs/ontologies.md): a new one from its document in YAML
// or JSON (object types, link types), typed or loaded from a file, or an edit of its document, and an import of objects
// and links into one from a JSON or JSON Lines file (POST /ontologies/{id}/import, all or
// nothing). A document in the form of examples/knowledge/support_ontology.json, {ontology,
// data}, is created and then its data imported.

import { useMemo, useState } from 'react'
import { stringify as toYaml } from 'yaml'
import { ApiError, api, documentOf, replacementPatch, upload } from '../api'
import { CodeEditor } from '../components/CodeEditor'
import type { Mark } from '../components/CodeEditor'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { flash } from '../flash'
import { locate, parseText } from '../pointer'
import type { Owned } from '../resource'
import { href, navigate, releaseLeaveGuard, useLeaveGuard } from '../router'
import type { Agent, ErrorItem } from '../types'
import { plural, useAsync } from '../util'

interface ImportResult { objects: Record<string, number>; links: Record<string, number> }

const EXAMPLE = `name: projects
description: Projects and the people on them
object_types:
  - name: person
    primary_key: email
    title_property: name
    properties:
      - {name: email, type: string}
      - {name: name, type: string, required: true}
  - name: project
    primary_key: code
    properties:
      - {name: code, type: string}
      - {name: budget, type: number}
link_types:
  - {name: works_on, from_type: person, to_type: project, cardinality: many_to_many, inverse: staffed_by}
`

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** What an import did, in words: "3 objects created, 2 links created". */
export function importSummary(result: ImportResult): string {
  const parts = [
    ...Object.entries(result.objects).filter(([, n]) => n).map(([what, n]) => `${plural(n, 'object')} ${what}`),
    ...Object.entries(result.links).filter(([, n]) => n).map(([what, n]) => `${plural(n, 'link')} ${what === 'existing' ? 'already there' : what}`),
  ]
  return parts.length ? parts.join(', ') : 'nothing new'
}

type Doc = Record<string, unknown>

/** A stored ontology's document as YAML: without what the server owns, nor empty fields. */
function yamlOf(stored: Owned & Doc): string {
  const doc = Object.fromEntries(Object.entries(documentOf(stored as unknown as Agent)).filter(([, v]) => v !== null))
  return toYaml(doc, { lineWidth: 0 })
}

/** An ontology's document to edit (`#/ontologies/{id}/edit`). */
export function OntologyEditor({ ontologyId }: { ontologyId: string }) {
  const stored = useAsync((s) => api.get<Owned & Doc>(`/ontologies/${encodeURIComponent(ontologyId)}`, s), [ontologyId])
  if (stored.error) return <ErrorBox error={stored.error} title="This ontology cannot be edited" />
  if (!stored.data) return <Loading what="the ontology" />
  return <OntologyDocument stored={stored.data} />
}

export function NewOntology() {
  return <OntologyDocument stored={null} />
}

function OntologyDocument({ stored }: { stored: (Owned & Doc) | null }) {
  const initial = useMemo(() => (stored ? yamlOf(stored) : ''), [stored])
  const [text, setText] = useState(initial)
  const [errors, setErrors] = useState<ErrorItem[]>([])
  const [problem, setProblem] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  // Where the ontology's pointers start in the text: /ontology when it is {ontology, data}.
  const [prefix, setPrefix] = useState('')
  const dirty = text.trim() !== initial.trim()
  useLeaveGuard(dirty && !busy ? (stored ? 'Leave the editor? Your changes to this ontology are not saved.' : 'Leave? The ontology is not created yet.') : null)

  const load = async (file: File | undefined) => {
    if (file) setText(await file.text())
  }

  const submit = async () => {
    const parsed = parseText(text, text.trimStart().startsWith('{') ? 'json' : 'yaml')
    if (parsed.error || !isObject(parsed.value)) {
      setErrors([])
      setProblem(parsed.error?.message ?? 'The document must be a mapping of fields: name, object_types, link_types.')
      return
    }
    const wrapped = !stored && isObject(parsed.value.ontology)
    const doc = wrapped ? (parsed.value.ontology as Record<string, unknown>) : parsed.value
    const data = wrapped ? parsed.value.data : undefined
    setPrefix(wrapped ? '/ontology' : '')
    setBusy(true)
    setProblem(null)
    setErrors([])
    let made: Owned | null = null
    try {
      if (stored) {
        const saved = await api.patch<Owned>(`/ontologies/${stored.id}`, replacementPatch(stored, doc))
        flash(saved.id, saved.version === stored.version ? 'No change to save.' : `Saved, version ${saved.version}.`)
        releaseLeaveGuard()
        navigate(`/ontologies/${saved.id}`)
        return
      }
      made = await api.post<Owned>('/ontologies', doc)
      let message = `Created the ontology ${made.name}.`
      if (data !== undefined) {
        setPrefix('/data')
        const result = await api.post<ImportResult>(`/ontologies/${made.id}/import`, data)
        message = `Created the ontology ${made.name} and imported ${importSummary(result)}.`
      }
      flash(made.id, message)
      releaseLeaveGuard()
      navigate(`/ontologies/${made.id}`)
    } catch (exc) {
      setBusy(false)
      setErrors(exc instanceof ApiError ? exc.errors : [])
      setProblem(exc)
      if (made) {
        // The ontology is there; only its data was refused: say so, and where it is.
        flash(made.id, `Created the ontology ${made.name}, but its data was refused; import it on this page.`)
        releaseLeaveGuard()
        navigate(`/ontologies/${made.id}`)
      }
    }
  }

  const marks = useMemo<Mark[]>(
    () => errors.flatMap((e) => { const at = locate(text, prefix + e.loc); return at ? [{ line: at.line, message: `${e.loc}: ${e.message}` }] : [] }),
    [errors, text, prefix],
  )

  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">{stored ? `Edit: ${stored.alias || stored.name}` : 'New ontology'}</span>}
        sub={<>Its object types (typed properties, a primary key) and link types, in YAML or JSON (docs/ontologies.md).{' '}
          {stored ? <a href={href(`/ontologies/${stored.id}`)}>Back to the ontology</a> : <a href={href('/ontologies')}>All ontologies</a>}</>}
      >
        {!stored && <button type="button" onClick={() => setText(EXAMPLE)} disabled={busy}>Start from an example</button>}
        <button type="button" className="primary" onClick={() => void submit()} disabled={busy || !text.trim()}>
          {busy ? 'Saving…' : stored ? 'Save' : 'Create'}
        </button>
      </PageHeader>
      {stored ? (
        <p className="muted small">A change must fit the objects and links stored: the server says what it would break.</p>
      ) : (
        <div className="field">
          <label htmlFor="ontology-file">Load a file</label>
          <input id="ontology-file" type="file" accept=".yaml,.yml,.json" onChange={(e) => void load(e.target.files?.[0])} />
          <p className="hint">A document, or {'{"ontology": …, "data": {"objects": […], "links": […]}}'} to import its data too.</p>
        </div>
      )}
      <div data-testid="ontology-problem"><ErrorBox error={problem} title={stored ? 'Not saved' : 'Not created'} /></div>
      <CodeEditor id="ontology-document" value={text} onChange={setText} marks={marks} label="Ontology document (YAML or JSON)" />
    </section>
  )
}

/** Objects and links from a file into the ontology; `onDone` loads its objects again. */
export function ImportData({ ontologyId, onDone }: { ontologyId: string; onDone: () => void }) {
  const [file, setFile] = useState<File | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [done, setDone] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const run = async () => {
    if (!file) {
      setError(new Error('Choose a JSON or JSON Lines file.'))
      return
    }
    const lines = /\.(jsonl|ndjson)$/i.test(file.name)
    setBusy(true)
    setError(null)
    setDone(null)
    try {
      const result = await upload<ImportResult>(`/ontologies/${encodeURIComponent(ontologyId)}/import`, file, lines ? 'application/jsonl' : 'application/json')
      setDone(`Imported from ${file.name}: ${importSummary(result)}.`)
      onDone()
    } catch (exc) {
      setError(exc)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form className="card form" aria-label="Import objects and links" data-testid="ontology-import" onSubmit={(e) => { e.preventDefault(); void run() }}>
      <div className="field">
        <label htmlFor="ontology-import-file">Objects and links file</label>
        <input id="ontology-import-file" type="file" accept=".json,.jsonl,.ndjson" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
        <p className="hint">
          JSON: {'{"objects": [{"type": …, "properties": {…}}], "links": [{"link_type": …, "from": key, "to": key}]}'}, or one item a line
          (.jsonl). All or nothing: an object with a key already there is updated.
        </p>
      </div>
      <div aria-live="polite">{done && <p className="success" role="status" data-testid="import-result">{done}</p>}</div>
      <ErrorBox error={error} title="Nothing imported" />
      <button type="submit" disabled={busy}>{busy ? 'Importing…' : 'Import'}</button>
    </form>
  )
}
