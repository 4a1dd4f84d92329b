// A form field for a typed variable: start variables of a workflow, human_input fields, a
// template's variables (which add integer, date and datetime).

export interface FieldSpec {
  name: string
  type: string
  description?: string
  required?: boolean
  options?: unknown[]
  default?: unknown
}

/** The text a field starts with: its default, written as the input shows it. */
export function initialText(field: FieldSpec): string {
  if (field.default === undefined || field.default === null) return ''
  if (field.type === 'object' || field.type === 'array') return JSON.stringify(field.default, null, 2)
  if (field.options?.length) return JSON.stringify(field.default)
  return String(field.default)
}

/** The value to send for a field's text, or undefined to leave it out (the server then uses
 * the default, or says it is required). Throws with a sentence when the text does not fit. */
export function valueOf(field: FieldSpec, text: string): unknown {
  if (text.trim() === '') return field.type === 'string' && text !== '' ? text : undefined
  if (field.options?.length) return JSON.parse(text)
  switch (field.type) {
    case 'number': {
      const n = Number(text)
      if (Number.isNaN(n)) throw new Error(`'${field.name}' should be a number.`)
      return n
    }
    case 'integer': {
      const n = Number(text)
      if (!Number.isInteger(n)) throw new Error(`'${field.name}' should be a whole number.`)
      return n
    }
    case 'boolean':
      return text === 'true'
    case 'object':
    case 'array': {
      let v: unknown
      try {
        v = JSON.parse(text)
      } catch {
        throw new Error(`'${field.name}' should be JSON (${field.type === 'array' ? 'e.g. [1, 2]' : 'e.g. {"a": 1}'}).`)
      }
      return v
    }
    default:
      return text
  }
}

const PLACEHOLDERS: Record<string, string> = { date: 'YYYY-MM-DD', datetime: 'YYYY-MM-DDTHH:MM:SSZ' }

interface Props {
  idPrefix: string
  field: FieldSpec
  value: string
  onChange: (value: string) => void
  error?: string | null
  multiline?: boolean
}

export function FieldInput({ idPrefix, field, value, onChange, error, multiline }: Props) {
  const id = `${idPrefix}-${field.name}`
  const hintId = field.description ? `${id}-hint` : undefined
  const errorId = error ? `${id}-error` : undefined
  const describedBy = [hintId, errorId].filter(Boolean).join(' ') || undefined
  const common = {
    id,
    name: field.name,
    'aria-describedby': describedBy,
    'aria-invalid': error ? true : undefined,
    'aria-required': field.required ? true : undefined,
    'data-testid': `field-${field.name}`,
  }
  let control
  if (field.options?.length) {
    control = (
      <select {...common} value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="">—</option>
        {field.options.map((o) => (
          <option key={JSON.stringify(o)} value={JSON.stringify(o)}>{typeof o === 'string' ? o : JSON.stringify(o)}</option>
        ))}
      </select>
    )
  } else if (field.type === 'boolean') {
    control = (
      <select {...common} value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="">—</option>
        <option value="true">yes (true)</option>
        <option value="false">no (false)</option>
      </select>
    )
  } else if (field.type === 'object' || field.type === 'array') {
    control = (
      <textarea {...common} rows={4} className="mono" value={value} onChange={(e) => onChange(e.target.value)}
        placeholder={field.type === 'array' ? '[1, 2, 3]' : '{"key": "value"}'} />
    )
  } else if (field.type === 'number' || field.type === 'integer') {
    const step = field.type === 'integer' ? 1 : 'any'
    control = <input {...common} type="number" step={step} value={value} onChange={(e) => onChange(e.target.value)} />
  } else if (multiline) {
    control = <textarea {...common} rows={3} value={value} onChange={(e) => onChange(e.target.value)} />
  } else {
    // Dates stay text inputs: the server checks them and says what it wants.
    const placeholder = PLACEHOLDERS[field.type]
    control = <input {...common} type="text" value={value} placeholder={placeholder} onChange={(e) => onChange(e.target.value)} />
  }
  return (
    <div className={`field${error ? ' has-error' : ''}`}>
      <label htmlFor={id}>
        {field.name} <span className="muted small">({field.type}{field.required === false ? ', optional' : ''})</span>
        {field.required !== false && <span className="required" aria-hidden="true"> *</span>}
      </label>
      {control}
      {field.description && <p id={hintId} className="hint">{field.description}</p>}
      {error && <p id={errorId} className="field-error" data-testid={`field-error-${field.name}`}>{error}</p>}
    </div>
  )
}

/** Splits "invalid answer: 'a' is required (boolean); 'b' should be ..." into per-field messages. */
export function messagesByField(message: string, names: string[]): { byField: Record<string, string>; rest: string[] } {
  const body = message.replace(/^invalid answer:\s*/, '')
  const byField: Record<string, string> = {}
  const rest: string[] = []
  for (const part of body.split(/;\s+/)) {
    const m = /^'([^']+)'/.exec(part)
    if (m && names.includes(m[1])) byField[m[1]] = byField[m[1]] ? `${byField[m[1]]}; ${part}` : part
    else rest.push(part)
  }
  return { byField, rest }
}
