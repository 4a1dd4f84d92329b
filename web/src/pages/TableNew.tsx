// A new table (docs/tables.md): from a file (CSV, JSON Lines or Parquet, sent as the body of
// POST /tables/import: the server infers the column types from every value) or from columns
// written here (POST /tables). The server's pointed errors go beside the field they name.

import { useState } from 'react'
import { api, query, upload } from '../api'
import { ErrorBox, PageHeader } from '../components/bits'
import { ColumnsEditor, columnsOf } from '../components/ColumnsEditor'
import type { ColumnRow } from '../components/ColumnsEditor'
import { flash } from '../flash'
import { placeErrors } from '../pointer'
import type { Owned } from '../resource'
import { href, navigate } from '../router'
import { plural } from '../util'

const FORMATS = { csv: 'text/csv', jsonl: 'application/x-ndjson', parquet: 'application/vnd.apache.parquet' } as const
type Format = keyof typeof FORMATS


/** The format a file's name says (.csv, .jsonl or .ndjson, .parquet), if any. */
function formatOf(name: string): Format | '' {
  const ext = name.toLowerCase().split('.').pop() ?? ''
  if (ext === 'csv') return 'csv'
  if (ext === 'jsonl' || ext === 'ndjson') return 'jsonl'
  if (ext === 'parquet') return 'parquet'
  return ''
}

function FieldError({ id, text }: { id: string; text?: string }) {
  return text ? <p className="field-error" id={`${id}-error`} data-testid={`error-${id}`}>{text}</p> : null
}

export function NewTable() {
  const [mode, setMode] = useState<'file' | 'columns'>('file')
  const [name, setName] = useState('')
  const [description, setDescription] = useState('')
  const [file, setFile] = useState<File | null>(null)
  const [format, setFormat] = useState<Format | ''>('')
  const [columns, setColumns] = useState<ColumnRow[]>([{ name: '', type: 'string', required: false, description: '' }])
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)

  const failed = (exc: unknown) => {
    const { byField, rest } = placeErrors(exc, ([head, i, field]) => {
      if (head === 'name' || (head === 'query' && i === 'name')) return 'name'
      if (head === 'query' && i === 'format') return 'format'
      if (head === 'file') return 'file'
      if (head === 'columns' && i !== undefined) return `column-${i}-${field ?? 'name'}`
      return null
    })
    setErrors(byField)
    setGeneral(rest)
  }

  const create = async () => {
    setErrors({})
    setGeneral(null)
    if (mode === 'file' && !file) {
      setErrors({ file: 'Choose a CSV, JSON Lines or Parquet file.' })
      return
    }
    setBusy(true)
    try {
      let made: Owned
      if (mode === 'file' && file) {
        const fmt = format || formatOf(file.name)
        const params = query({ name: name.trim(), description, format: fmt || undefined })
        const answer = await upload<{ table: Owned; inserted: number }>(`/tables/import${params}`, file, fmt ? FORMATS[fmt] : 'application/octet-stream')
        made = answer.table
        flash(made.id, `Imported ${plural(answer.inserted, 'row')} from ${file.name}.`)
      } else {
        made = await api.post<Owned>('/tables', { name: name.trim(), description, columns: columnsOf(columns) })
        flash(made.id, `Created the table ${made.name}.`)
      }
      navigate(`/tables/${made.id}`)
    } catch (exc) {
      failed(exc)
      setBusy(false)
    }
  }

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">New table</span>} sub={<>From a file (the column types are inferred from every value) or from its columns. <a href={href('/tables')}>All tables</a></>}>
        <fieldset className="segmented">
          <legend className="visually-hidden">Make it from</legend>
          {(['file', 'columns'] as const).map((m) => (
            <label key={m} className={mode === m ? 'active' : ''}>
              <input type="radio" name="table-mode" value={m} checked={mode === m} onChange={() => setMode(m)} />
              {m === 'file' ? 'A file' : 'Columns'}
            </label>
          ))}
        </fieldset>
      </PageHeader>
      <form className="card form" noValidate aria-label="The new table" data-testid="table-form" onSubmit={(e) => { e.preventDefault(); void create() }}>
        <div className={`field${errors.name ? ' has-error' : ''}`}>
          <label htmlFor="table-name">Name</label>
          <input id="table-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="sales_2026" aria-invalid={errors.name ? true : undefined} />
          <FieldError id="name" text={errors.name} />
        </div>
        <div className="field">
          <label htmlFor="table-description">Description</label>
          <input id="table-description" value={description} onChange={(e) => setDescription(e.target.value)} />
        </div>
        {mode === 'file' ? (
          <>
            <div className={`field${errors.file ? ' has-error' : ''}`}>
              <label htmlFor="table-file">File</label>
              <input id="table-file" type="file" accept=".csv,.jsonl,.ndjson,.parquet,text/csv"
                onChange={(e) => { const f = e.target.files?.[0] ?? null; setFile(f); if (f) setFormat(formatOf(f.name)) }} />
              <p className="hint">CSV with a header, JSON Lines (one object a line) or Parquet; up to 512 MiB.</p>
              <FieldError id="file" text={errors.file} />
            </div>
            <div className={`field${errors.format ? ' has-error' : ''}`}>
              <label htmlFor="table-format">Format</label>
              <select id="table-format" value={format} onChange={(e) => setFormat(e.target.value as Format | '')}>
                <option value="">from the file&apos;s name</option>
                <option value="csv">CSV</option>
                <option value="jsonl">JSON Lines</option>
                <option value="parquet">Parquet</option>
              </select>
              <FieldError id="format" text={errors.format} />
            </div>
          </>
        ) : (
          <ColumnsEditor columns={columns} onChange={setColumns} errors={errors} hint="Rows are added by the API, an import or an agent." />
        )}
        <ErrorBox error={general} title="Not created" />
        <button type="submit" className="primary" disabled={busy}>{busy ? 'Creating…' : mode === 'file' ? 'Import' : 'Create'}</button>
      </form>
    </section>
  )
}

/** More rows from a file, matched to the table's columns by name (POST /tables/{id}/import);
 * `onDone` loads the rows again. */
export function AppendFile({ tableId, onDone }: { tableId: string; onDone: () => void }) {
  const [file, setFile] = useState<File | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [done, setDone] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const run = async () => {
    const fmt = file ? formatOf(file.name) : ''
    if (!file || !fmt) {
      setError(new Error('Choose a .csv, .jsonl or .parquet file.'))
      return
    }
    setBusy(true)
    setError(null)
    setDone(null)
    try {
      const answer = await upload<{ inserted: number }>(`/tables/${encodeURIComponent(tableId)}/import${query({ format: fmt })}`, file, FORMATS[fmt])
      setDone(`Appended ${plural(answer.inserted, 'row')} from ${file.name}.`)
      onDone()
    } catch (exc) {
      setError(exc)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form className="card form" aria-label="Append rows from a file" data-testid="table-append" onSubmit={(e) => { e.preventDefault(); void run() }}>
      <div className="field">
        <label htmlFor="table-append-file">Rows file</label>
        <input id="table-append-file" type="file" accept=".csv,.jsonl,.ndjson,.parquet" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
        <p className="hint">CSV, JSON Lines or Parquet; its columns are matched to the table&apos;s by name. All or nothing.</p>
      </div>
      <div aria-live="polite">{done && <p className="success" role="status" data-testid="append-result">{done}</p>}</div>
      <ErrorBox error={error} title="Nothing appended" />
      <button type="submit" disabled={busy}>{busy ? 'Appending…' : 'Append'}</button>
    </form>
  )
}
