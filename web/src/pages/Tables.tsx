// Tables (docs/tables.md): the list, a new one (TableNew), and one table: its columns (changed
// by editors), its first rows, a query form (TableQuery), its sharing and versions; Delete for
// those allowed.

import { useState } from 'react'
import { api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { ColumnsEditor, columnsOf, rowsOf } from '../components/ColumnsEditor'
import type { ColumnRow } from '../components/ColumnsEditor'
import { DeleteButton, Flashed, SharingAndVersions } from '../components/ResourceSections'
import { takeFlash } from '../flash'
import { everything } from '../folders'
import type { Owned } from '../resource'
import { placeErrors } from '../pointer'
import { href, useLeaveGuard } from '../router'
import { can, useScopeOn } from '../scope'
import type { Page } from '../types'
import { useAsync } from '../util'
import { MarkingBadges } from './Folders'
import { AppendFile, NewTable } from './TableNew'
import { QueryForm, cell } from './TableQuery'
import type { Column } from './TableQuery'

/** A table resource: its envelope and typed columns. */
interface TableDoc extends Owned {
  columns: Column[]
}
type Row = Record<string, unknown>

/** Every table the caller can see. */
function TableList() {
  const tables = useAsync((s) => everything('/tables', s) as Promise<TableDoc[]>, [])
  const [flashed] = useState(() => takeFlash('/tables'))
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Tables</span>} sub="Typed rows that agents can describe, query and read with SQL.">
        <a className="button primary" href={href('/tables/new')}>New table</a>
      </PageHeader>
      <Flashed text={flashed} />
      <ErrorBox error={tables.error} />
      {!tables.data ? (
        <Loading what="tables" />
      ) : tables.data.length === 0 ? (
        <p className="muted">No tables that you can see.</p>
      ) : (
        <table className="table" data-testid="tables">
          <thead>
            <tr><th>Name</th><th>Columns</th><th>Markings</th></tr>
          </thead>
          <tbody>
            {tables.data.map((t) => (
              <tr key={t.id} data-testid="table-row" data-name={t.name}>
                <td><a href={href(`/tables/${t.id}`)}>{t.alias || t.name}</a></td>
                <td>{(t.columns ?? []).map((c) => c.name).join(', ')}</td>
                <td><MarkingBadges markings={t.effective_markings} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

/** One table: its columns and its first rows. */
function TableView({ tableId }: { tableId: string }) {
  const path = `/tables/${encodeURIComponent(tableId)}`
  const table = useAsync((s) => api.get<TableDoc>(path, s), [path])
  const rows = useAsync((s) => api.get<Page<Row>>(`${path}/rows?limit=50`, s), [path])
  const [flashed] = useState(() => takeFlash(tableId))
  const [editing, setEditing] = useState(false)
  const [saved, setSaved] = useState<string | null>(null)
  const t = table.data
  const scope = useScopeOn(path, t)
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{t ? t.alias || t.name : 'Table'}</span>} sub={t?.description}>
        <a className="button" href={href('/tables')}>All tables</a>
        {t && can(scope, 'share') && <DeleteButton path={path} resource={t} noun="table" listPath="/tables" consequence="Its rows are deleted with it." />}
      </PageHeader>
      <Flashed text={saved ?? flashed} />
      <ErrorBox error={table.error} title="This table cannot be shown" />
      {t && (
        <>
          <div className="meta">
            <code>{t.id}</code> <span className="pill">version {t.version}</span>
            <MarkingBadges markings={t.effective_markings} />
          </div>
          <div className="row spread">
            <h2>Columns</h2>
            {can(scope, 'edit') && !editing && <button type="button" onClick={() => setEditing(true)}>Edit columns</button>}
          </div>
          {editing ? (
            <EditColumns table={t} onDone={(message) => { setEditing(false); setSaved(message); if (message) { table.reload(); rows.reload() } }} />
          ) : (
            <table className="table" data-testid="table-columns">
              <thead>
                <tr><th>Name</th><th>Type</th><th>Required</th><th>Description</th></tr>
              </thead>
              <tbody>
                {t.columns.map((c) => (
                  <tr key={c.name}>
                    <td data-label="Name"><code>{c.name}</code></td>
                    <td data-label="Type">{c.type}</td>
                    <td data-label="Required">{c.nullable === false ? 'yes' : ''}</td>
                    <td data-label="Description">{c.description}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <h2>First rows</h2>
          <ErrorBox error={rows.error} />
          {!rows.data ? (
            <Loading what="rows" />
          ) : rows.data.data.length === 0 ? (
            <p className="muted">No rows yet.</p>
          ) : (
            <div className="table-scroll">
              <table className="table" data-testid="table-rows">
                <thead>
                  <tr>
                    <th>#</th>
                    {t.columns.map((c) => <th key={c.name}>{c.name}</th>)}
                  </tr>
                </thead>
                <tbody>
                  {rows.data.data.map((r) => (
                    <tr key={String(r._row)}>
                      <td className="muted" data-label="#">{cell(r._row)}</td>
                      {t.columns.map((c) => <td key={c.name} data-label={c.name}>{cell(r[c.name])}</td>)}
                    </tr>
                  ))}
                </tbody>
              </table>
              {rows.data.next_cursor && <p className="muted small">The first 50 rows; query the rest below.</p>}
            </div>
          )}
          {can(scope, 'edit') && (
            <>
              <h2>Append rows</h2>
              <AppendFile tableId={t.id} onDone={rows.reload} />
            </>
          )}
          <h2>Query</h2>
          <QueryForm tableId={t.id} columns={t.columns} />
          <SharingAndVersions scope={scope} path={path} resource={t} noun="table" onChanged={table.reload} />
        </>
      )}
    </section>
  )
}

export function TablesPage({ tableId }: { tableId: string | null }) {
  if (tableId === 'new') return <NewTable />
  return tableId ? <TableView key={tableId} tableId={tableId} /> : <TableList />
}

/** The table's columns changed (a PATCH of `columns`: a new version). On a table with rows the
 * server allows only what keeps them (docs/tables.md) and says where it would not. */
function EditColumns({ table, onDone }: { table: TableDoc; onDone: (message: string | null) => void }) {
  const [columns, setColumns] = useState<ColumnRow[]>(() => rowsOf(table.columns))
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const dirty = JSON.stringify(columnsOf(columns)) !== JSON.stringify(columnsOf(rowsOf(table.columns)))
  useLeaveGuard(dirty && !busy ? 'Leave? Your changes to the columns are not saved.' : null)
  const save = async () => {
    setBusy(true)
    setErrors({})
    setGeneral(null)
    try {
      const updated = await api.patch<TableDoc>(`/tables/${encodeURIComponent(table.id)}`, { columns: columnsOf(columns) })
      onDone(updated.version === table.version ? 'No change to save.' : `Saved, version ${updated.version}.`)
    } catch (exc) {
      const { byField, rest } = placeErrors(exc, ([head, i, field]) => (head === 'columns' && i !== undefined ? `column-${i}-${field ?? 'name'}` : null))
      setErrors(byField)
      setGeneral(rest)
      setBusy(false)
    }
  }
  return (
    <form className="card form wide" noValidate aria-label="The table's columns" onSubmit={(e) => { e.preventDefault(); void save() }}>
      <ColumnsEditor columns={columns} onChange={setColumns} errors={errors}
        hint="A new column on a table with rows must not be required; integer may become number; a removed column loses its values." />
      <ErrorBox error={general} title="Not saved" />
      <div className="row">
        <button type="submit" className="primary" disabled={busy}>{busy ? 'Saving…' : 'Save columns'}</button>
        <button type="button" onClick={() => onDone(null)} disabled={busy}>Cancel</button>
      </div>
    </form>
  )
}
