// The structured query of a table (POST /tables/{id}/query, docs/tables.md): conditions on
// columns (all must hold), a group with aggregates, a sort and a limit, built into the query
// document; the result as a table. The server checks the query and points at what is wrong
// (/filter/and/0/value …): that message goes beside the field it names.

import { useState } from 'react'
import { api } from '../api'
import { ErrorBox } from '../components/bits'
import { placeErrors } from '../pointer'
import { plural } from '../util'

export interface Column { name: string; type: string; nullable?: boolean; description?: string }
interface Condition { column: string; op: string; value: string }
interface Aggregate { op: string; column: string }
interface Result { columns: { name: string; type: string }[]; rows: Record<string, unknown>[]; next_cursor: string | null }

const OPS = ['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'in', 'contains', 'is_null'] as const
const AGGREGATES = ['count', 'sum', 'avg', 'min', 'max'] as const

export function cell(value: unknown): string {
  if (value === null || value === undefined) return ''
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

/** A value typed in a field as the column's JSON: a number for a number column, and so on.
 * What does not read as one is sent as it was typed, for the server to say what it wants. */
function valueOf(type: string | undefined, text: string): unknown {
  const t = text.trim()
  if ((type === 'integer' || type === 'number') && t !== '' && !Number.isNaN(Number(t))) return Number(t)
  if (type === 'boolean' && (t === 'true' || t === 'false')) return t === 'true'
  if (type === 'json') {
    try { return JSON.parse(t) } catch { return text }
  }
  return text
}

function FieldError({ id, text }: { id: string; text?: string }) {
  return text ? <p className="field-error" id={`${id}-error`} data-testid={`query-error-${id}`}>{text}</p> : null
}

export function QueryForm({ tableId, columns }: { tableId: string; columns: Column[] }) {
  const [conditions, setConditions] = useState<Condition[]>([])
  const [groupBy, setGroupBy] = useState('')
  const [aggregates, setAggregates] = useState<Aggregate[]>([])
  const [sort, setSort] = useState('')
  const [desc, setDesc] = useState(false)
  const [limit, setLimit] = useState('100')
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [general, setGeneral] = useState<unknown>(null)
  const [result, setResult] = useState<Result | null>(null)
  const [busy, setBusy] = useState(false)
  const typeOf = (name: string) => columns.find((c) => c.name === name)?.type

  // What the sort may name: a column, or (grouped) a result column such as sum_units.
  const outNames = aggregates.map((a) => (a.column ? `${a.op}_${a.column}` : a.op))
  const sortable = groupBy || aggregates.length ? [...(groupBy ? [groupBy] : []), ...outNames] : columns.map((c) => c.name)
  // A sort on what the result no longer has (the grouping changed) is dropped, as shown.
  const sortBy = sortable.includes(sort) ? sort : ''

  const queryOf = (cursor: string | null): Record<string, unknown> => {
    const q: Record<string, unknown> = {}
    if (conditions.length) {
      q.filter = {
        and: conditions.map((c) => {
          if (c.op === 'is_null') return { column: c.column, op: c.op, value: c.value.trim() !== 'false' }
          const value = c.op === 'in' ? c.value.split(',').map((v) => valueOf(typeOf(c.column), v)) : valueOf(typeOf(c.column), c.value)
          return { column: c.column, op: c.op, value }
        }),
      }
    }
    if (groupBy) q.group_by = [groupBy]
    if (aggregates.length) q.aggregates = aggregates.map((a) => (a.column ? { op: a.op, column: a.column } : { op: a.op }))
    if (sortBy) q.sort = [{ column: sortBy, desc }]
    const n = Number(limit)
    if (limit.trim()) q.limit = Number.isNaN(n) ? limit : n
    if (cursor) q.cursor = cursor
    return q
  }

  const run = async (cursor: string | null) => {
    setBusy(true)
    setErrors({})
    setGeneral(null)
    try {
      const page = await api.post<Result>(`/tables/${encodeURIComponent(tableId)}/query`, queryOf(cursor))
      setResult(cursor && result ? { ...page, rows: [...result.rows, ...page.rows] } : page)
    } catch (exc) {
      const { byField, rest } = placeErrors(exc, ([head, a, b, c]) => {
        if (head === 'filter' && a === 'and' && b !== undefined) return `filter-${b}-${c ?? 'column'}`
        if (head === 'group_by') return 'group'
        if (head === 'aggregates' && a !== undefined) return `aggregate-${a}`
        if (head === 'aggregates') return 'aggregate-0'
        if (head === 'sort') return 'sort'
        if (head === 'limit') return 'limit'
        return null
      })
      setErrors(byField)
      setGeneral(rest)
      if (!cursor) setResult(null)
    } finally {
      setBusy(false)
    }
  }

  const setCondition = (i: number, patch: Partial<Condition>) => setConditions((cs) => cs.map((c, j) => (j === i ? { ...c, ...patch } : c)))
  const setAggregate = (i: number, patch: Partial<Aggregate>) => setAggregates((as) => as.map((a, j) => (j === i ? { ...a, ...patch } : a)))
  const first = columns[0]?.name ?? ''

  return (
    <>
      <form className="card" noValidate aria-label="Query the table" data-testid="query-form" onSubmit={(e) => { e.preventDefault(); void run(null) }}>
        <fieldset className="field">
          <legend>Rows where</legend>
          {conditions.length === 0 && <p className="muted small">Every row.</p>}
          {conditions.map((c, i) => (
            <div key={i} data-testid="query-condition">
              <div className="row wrap controls-row">
                <select aria-label={`Condition ${i + 1}: column`} value={c.column} onChange={(e) => setCondition(i, { column: e.target.value })}>
                  {columns.map((col) => <option key={col.name} value={col.name}>{col.name}</option>)}
                </select>
                <select aria-label={`Condition ${i + 1}: op`} value={c.op} onChange={(e) => setCondition(i, { op: e.target.value })}>
                  {OPS.map((op) => <option key={op} value={op}>{op}</option>)}
                </select>
                <input aria-label={`Condition ${i + 1}: value`} className="grow" value={c.value} onChange={(e) => setCondition(i, { value: e.target.value })}
                  placeholder={c.op === 'in' ? 'a, b, c' : c.op === 'is_null' ? 'true (is null) or false' : typeOf(c.column) ?? ''}
                  aria-invalid={errors[`filter-${i}-value`] ? true : undefined}
                  aria-describedby={errors[`filter-${i}-value`] ? `filter-${i}-value-error` : undefined} />
                <button type="button" className="link-button" onClick={() => setConditions((cs) => cs.filter((_, j) => j !== i))}>Remove</button>
              </div>
              {['column', 'op', 'value'].map((f) => <FieldError key={f} id={`filter-${i}-${f}`} text={errors[`filter-${i}-${f}`]} />)}
            </div>
          ))}
          <button type="button" onClick={() => setConditions((cs) => [...cs, { column: first, op: 'eq', value: '' }])}>Add a condition</button>
        </fieldset>
        <div className="row wrap">
          <div className="field">
            <label htmlFor="query-group">Group by</label>
            <select id="query-group" value={groupBy} onChange={(e) => setGroupBy(e.target.value)}>
              <option value="">no grouping</option>
              {columns.map((col) => <option key={col.name} value={col.name}>{col.name}</option>)}
            </select>
            <FieldError id="group" text={errors.group} />
          </div>
          <fieldset className="field grow">
            <legend>Aggregates</legend>
            {aggregates.map((a, i) => (
              <div key={i}>
                <div className="row controls-row">
                  <select aria-label={`Aggregate ${i + 1}: function`} value={a.op} onChange={(e) => setAggregate(i, { op: e.target.value })}>
                    {AGGREGATES.map((op) => <option key={op} value={op}>{op}</option>)}
                  </select>
                  <select aria-label={`Aggregate ${i + 1}: column`} value={a.column} onChange={(e) => setAggregate(i, { column: e.target.value })}>
                    <option value="">{a.op === 'count' ? 'rows' : '—'}</option>
                    {columns.map((col) => <option key={col.name} value={col.name}>{col.name}</option>)}
                  </select>
                  <button type="button" className="link-button" onClick={() => setAggregates((as) => as.filter((_, j) => j !== i))}>Remove</button>
                </div>
                <FieldError id={`aggregate-${i}`} text={errors[`aggregate-${i}`]} />
              </div>
            ))}
            <button type="button" onClick={() => setAggregates((as) => [...as, { op: 'count', column: '' }])}>Add an aggregate</button>
          </fieldset>
        </div>
        <div className="row wrap">
          <div className="field">
            <label htmlFor="query-sort">Sort by</label>
            <select id="query-sort" value={sortBy} onChange={(e) => setSort(e.target.value)}>
              <option value="">row order</option>
              {sortable.map((n) => <option key={n} value={n}>{n}</option>)}
            </select>
            <FieldError id="sort" text={errors.sort} />
          </div>
          <label className="choice inline"><input type="checkbox" checked={desc} onChange={(e) => setDesc(e.target.checked)} /> <span>descending</span></label>
          <div className="field">
            <label htmlFor="query-limit">Limit</label>
            <input id="query-limit" inputMode="numeric" value={limit} onChange={(e) => setLimit(e.target.value)} size={6} />
            <FieldError id="limit" text={errors.limit} />
          </div>
        </div>
        <ErrorBox error={general} title="The query was refused" />
        <button type="submit" className="primary" disabled={busy}>{busy ? 'Running…' : 'Run the query'}</button>
      </form>
      {result && <ResultTable result={result} busy={busy} onMore={() => void run(result.next_cursor)} />}
    </>
  )
}

function ResultTable({ result, busy, onMore }: { result: Result; busy: boolean; onMore: () => void }) {
  if (result.rows.length === 0) return <p className="muted" data-testid="query-result-empty">No rows match.</p>
  return (
    <div className="table-scroll">
      <h3>Result <span className="muted small">({plural(result.rows.length, 'row')}{result.next_cursor ? ', more to load' : ''})</span></h3>
      <table className="table" data-testid="query-result">
        <thead>
          <tr>{result.columns.map((c) => <th key={c.name}>{c.name} <span className="muted small">{c.type}</span></th>)}</tr>
        </thead>
        <tbody>
          {result.rows.map((r, i) => (
            <tr key={i} data-testid="query-row">
              {result.columns.map((c) => <td key={c.name} data-label={c.name}>{cell(r[c.name])}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
      {result.next_cursor && <button type="button" onClick={onMore} disabled={busy}>More rows</button>}
    </div>
  )
}
