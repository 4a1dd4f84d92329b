import { api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { everything } from '../folders'
import { href } from '../router'
import type { Page, Placed } from '../types'
import { useAsync } from '../util'
import { MarkingBadges } from './Folders'

/** A table resource (docs/tables.md): its envelope and typed columns. */
interface Column {
  name: string
  type: string
  nullable?: boolean
  description?: string
}
interface TableDoc extends Placed {
  columns: Column[]
}
type Row = Record<string, unknown>

function cell(value: unknown): string {
  if (value === null || value === undefined) return ''
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

/** Every table the caller can see. */
function TableList() {
  const tables = useAsync((s) => everything('/tables', s) as Promise<TableDoc[]>, [])
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Tables</span>} sub="Typed rows that agents can describe, query and read with SQL. Import one with dhub tables import FILE." />
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
  const t = table.data
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{t ? t.alias || t.name : 'Table'}</span>} sub={t?.description} />
      <ErrorBox error={table.error} title="This table cannot be shown" />
      {t && (
        <>
          <div className="meta">
            <code>{t.id}</code> <span className="pill">version {t.version}</span>
            <MarkingBadges markings={t.effective_markings} />
          </div>
          <h2>Columns</h2>
          <table className="table" data-testid="table-columns">
            <thead>
              <tr><th>Name</th><th>Type</th><th>Required</th><th>Description</th></tr>
            </thead>
            <tbody>
              {t.columns.map((c) => (
                <tr key={c.name}>
                  <td><code>{c.name}</code></td>
                  <td>{c.type}</td>
                  <td>{c.nullable === false ? 'yes' : ''}</td>
                  <td>{c.description}</td>
                </tr>
              ))}
            </tbody>
          </table>
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
                      <td className="muted">{cell(r._row)}</td>
                      {t.columns.map((c) => <td key={c.name}>{cell(r[c.name])}</td>)}
                    </tr>
                  ))}
                </tbody>
              </table>
              {rows.data.next_cursor && <p className="muted small">The first 50 rows; query the rest with the API or dhub tables query.</p>}
            </div>
          )}
        </>
      )}
    </section>
  )
}

export function TablesPage({ tableId }: { tableId: string | null }) {
  return tableId ? <TableView key={tableId} tableId={tableId} /> : <TableList />
}
