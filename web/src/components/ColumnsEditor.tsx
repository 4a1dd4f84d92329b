// A table's columns as rows of small controls (name, type, required, description): a new
// table's (TableNew) and a change of a stored one's (Tables: a PATCH of `columns`, a new
// version; docs/tables.md "Changing columns"). Errors at /columns/i/… come beside the row.

export const TYPES = ['string', 'number', 'integer', 'boolean', 'date', 'datetime', 'json'] as const
export interface ColumnRow { name: string; type: (typeof TYPES)[number]; required: boolean; description: string }

/** The `columns` of the table document. */
export function columnsOf(rows: ColumnRow[]): { name: string; type: string; nullable: boolean; description: string }[] {
  return rows.map((c) => ({ name: c.name.trim(), type: c.type, nullable: !c.required, description: c.description }))
}

/** The rows of stored columns. */
export function rowsOf(columns: { name: string; type: string; nullable?: boolean; description?: string }[]): ColumnRow[] {
  return columns.map((c) => ({
    name: c.name, type: (TYPES as readonly string[]).includes(c.type) ? (c.type as ColumnRow['type']) : 'string',
    required: c.nullable === false, description: c.description ?? '',
  }))
}

function FieldError({ id, text }: { id: string; text?: string }) {
  return text ? <p className="field-error" id={`${id}-error`} data-testid={`error-${id}`}>{text}</p> : null
}

/** `errors` by `column-{i}-{field}`. */
export function ColumnsEditor({ columns, onChange, errors, hint }: { columns: ColumnRow[]; onChange: (c: ColumnRow[]) => void; errors: Record<string, string>; hint?: string }) {
  const change = (i: number, patch: Partial<ColumnRow>) => onChange(columns.map((c, j) => (j === i ? { ...c, ...patch } : c)))
  return (
    <fieldset className="field" data-testid="table-columns-form">
      <legend>Columns</legend>
      {columns.map((c, i) => (
        <div key={i} data-testid="column-row">
          <div className="row wrap controls-row">
            <input aria-label={`Column ${i + 1}: name`} value={c.name} onChange={(e) => change(i, { name: e.target.value })} placeholder="name"
              aria-invalid={errors[`column-${i}-name`] ? true : undefined} />
            <select aria-label={`Column ${i + 1}: type`} value={c.type} onChange={(e) => change(i, { type: e.target.value as ColumnRow['type'] })}>
              {TYPES.map((t) => <option key={t} value={t}>{t}</option>)}
            </select>
            <label className="choice inline"><input type="checkbox" aria-label={`Column ${i + 1}: required`} checked={c.required} onChange={(e) => change(i, { required: e.target.checked })} /> <span>required</span></label>
            <input aria-label={`Column ${i + 1}: description`} className="grow" value={c.description} onChange={(e) => change(i, { description: e.target.value })} placeholder="description" />
            <button type="button" className="link-button" onClick={() => onChange(columns.filter((_, j) => j !== i))}>Remove</button>
          </div>
          {['name', 'type', 'nullable', 'description'].map((f) => <FieldError key={f} id={`column-${i}-${f}`} text={errors[`column-${i}-${f}`]} />)}
        </div>
      ))}
      <button type="button" onClick={() => onChange([...columns, { name: '', type: 'string', required: false, description: '' }])}>Add a column</button>
      <p className="hint">Names: letters, digits and _, a letter first. {hint}</p>
    </fieldset>
  )
}
