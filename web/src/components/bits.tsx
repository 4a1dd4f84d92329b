import type { ReactNode } from 'react'
import { ApiError } from '../api'
import { errorText, pretty } from '../util'

export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`status status-${status}`} data-testid="run-status" data-status={status}>
      {status}
    </span>
  )
}

export function ErrorBox({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null
  const items = error instanceof ApiError ? error.errors : []
  return (
    <div className="error-box" role="alert">
      {title && <strong>{title}: </strong>}
      {errorText(error)}
      {items.length > 1 && (
        <ul>
          {items.map((e, i) => (
            <li key={i}><code>{e.loc || '/'}</code> {e.message}</li>
          ))}
        </ul>
      )}
    </div>
  )
}

export function JsonBlock({ value, label, testId }: { value: unknown; label?: string; testId?: string }) {
  return (
    <pre className="json" aria-label={label} data-testid={testId} tabIndex={0}>
      {pretty(value)}
    </pre>
  )
}

export function Loading({ what }: { what?: string }) {
  return <p className="muted" role="status">Loading{what ? ` ${what}` : ''}…</p>
}

export function Tags({ tags, onPick }: { tags: string[] | null; onPick?: (tag: string) => void }) {
  if (!tags?.length) return null
  return (
    <span className="tags">
      {tags.map((t) =>
        onPick ? (
          <button key={t} type="button" className="tag" onClick={() => onPick(t)} aria-label={`Filter by tag ${t}`}>
            {t}
          </button>
        ) : (
          <span key={t} className="tag">{t}</span>
        ),
      )}
    </span>
  )
}

export function PageHeader({ title, children, sub }: { title: ReactNode; children?: ReactNode; sub?: ReactNode }) {
  return (
    <div className="page-header">
      <div>
        <h1>{title}</h1>
        {sub && <div className="sub">{sub}</div>}
      </div>
      {children && <div className="actions">{children}</div>}
    </div>
  )
}

/** A value in a definition list: short JSON inline, the rest as a block. */
export function Value({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <span className="muted">—</span>
  if (value === '') return <span className="muted" title="an empty string">(empty)</span>
  if (typeof value === 'string') return <span className="value-text">{value}</span>
  if (typeof value === 'number' || typeof value === 'boolean') return <code>{String(value)}</code>
  const text = JSON.stringify(value)
  if (text.length < 60) return <code>{text}</code>
  return <JsonBlock value={value} />
}

export function KeyValues({ values, testId, empty }: { values: Record<string, unknown> | null | undefined; testId?: string; empty?: string }) {
  const entries = Object.entries(values ?? {})
  if (!entries.length) return <p className="muted" data-testid={testId}>{empty ?? 'None.'}</p>
  return (
    <dl className="kv" data-testid={testId}>
      {entries.map(([k, v]) => (
        <div key={k} className="kv-row">
          <dt>{k}</dt>
          <dd><Value value={v} /></dd>
        </div>
      ))}
    </dl>
  )
}
