// Who a resource is shared with (docs/access.md): its owners, its grants (a user, a group or
// everyone, with a scope) and its markings. Every kind with the common envelope has the same
// endpoints under its API path (`/agents/ID`, `/tables/ID`, …: api/routers/resources.py), so
// one panel serves them all; the server checks every change anyway.

import { useState } from 'react'
import { api } from '../api'
import { ErrorBox } from './bits'
import { useSession } from '../session'
import type { Grant, Principal } from '../types'
import { useAsync } from '../util'

const SCOPES = ['viewer', 'runner', 'editor'] as const

export interface Shareable {
  id: string
  owners: Principal[]
  markings: string[]
  my_share_scope: 'owner' | 'grant' | 'admin' | null
}

interface Props {
  /** The resource's API path, e.g. `/tables/table.…`. */
  path: string
  resource: Shareable
  /** What it is, for the sentences: "agent", "table"… */
  noun: string
  /** Called after a change, to load the resource again (owners and markings are on it). */
  onChanged: () => void
  /** Under a page's own "Sharing" heading: the cards' titles are one level down. */
  embedded?: boolean
}

export function SharingPanel({ path, resource: a, noun, onChanged, embedded = false }: Props) {
  const H = embedded ? 'h3' : 'h2'
  const { me } = useSession()
  const grants = useAsync((s) => api.get<{ data: Grant[] }>(`${path}/grants`, s), [path])
  const principals = useAsync(async (s) => {
    const [users, groups] = await Promise.all([
      api.get<{ data: { id: string; display_name: string }[] }>('/users', s),
      api.get<{ data: { id: string; display_name: string }[] }>('/groups', s),
    ])
    return [{ id: 'public.all', display_name: 'All users' }, ...users.data, ...groups.data]
  }, [])
  const [error, setError] = useState<unknown>(null)
  const [message, setMessage] = useState<string | null>(null)
  const [newOwner, setNewOwner] = useState('')
  const [grantee, setGrantee] = useState('')
  const [scope, setScope] = useState<(typeof SCOPES)[number]>('viewer')
  const [marking, setMarking] = useState('')

  const canShare = a.my_share_scope === 'owner' || a.my_share_scope === 'admin'
  const canMark = a.my_share_scope === 'owner'
  const markable = me.markings.filter((m) => !a.markings.includes(m))

  const act = async (what: () => Promise<unknown>, done: string) => {
    setError(null)
    setMessage(null)
    try {
      await what()
      setMessage(done)
      onChanged()
      grants.reload()
      return true
    } catch (e) {
      setError(e)
      return false
    }
  }
  const setOwners = (ids: string[], done: string) => act(() => api.patch(path, { owners: ids }), done)

  return (
    <div data-testid="sharing">
      {!canShare && (
        <p className="notice">Only the {noun}&apos;s owners and admins change who it is shared with; you can look.</p>
      )}
      <div aria-live="polite">{message && <p className="success" role="status" data-testid="sharing-message">{message}</p>}</div>
      <ErrorBox error={error} title="Not changed" />
      <datalist id="principals">
        {(principals.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.display_name}</option>)}
      </datalist>

      <div className="sharing-grid">
        <section className="card" aria-labelledby="owners-title">
          <H id="owners-title">Owners</H>
          <ul className="plain" data-testid="owners">
            {a.owners.map((o) => (
              <li key={o.id} className="row spread">
                <span>{o.display_name} <span className="muted small">{o.id}</span></span>
                {canShare && a.owners.length > 1 && (
                  <button type="button" className="link-button" aria-label={`Remove owner ${o.id}`}
                    onClick={() => setOwners(a.owners.filter((x) => x.id !== o.id).map((x) => x.id), `${o.id} is no longer an owner.`)}>
                    Remove
                  </button>
                )}
              </li>
            ))}
          </ul>
          {canShare && (
            <form className="row" onSubmit={async (e) => {
              e.preventDefault()
              if (!newOwner.trim()) return
              if (await setOwners([...a.owners.map((o) => o.id), newOwner.trim()], `${newOwner.trim()} is an owner.`)) setNewOwner('')
            }}>
              <div className="field grow">
                <label htmlFor="new-owner">Add an owner</label>
                <input id="new-owner" list="principals" value={newOwner} onChange={(e) => setNewOwner(e.target.value)} placeholder="user.alice, group.eng, public.all" />
              </div>
              <button type="submit">Add owner</button>
            </form>
          )}
        </section>

        <section className="card" aria-labelledby="grants-title">
          <H id="grants-title">Grants</H>
          <ErrorBox error={grants.error} />
          {grants.data?.data.length === 0 && <p className="muted">Not shared with anyone else.</p>}
          <ul className="plain" data-testid="grants">
            {grants.data?.data.map((g) => (
              <li key={g.principal_id} className="row spread">
                <span>{g.display_name} <span className="muted small">{g.principal_id}</span></span>
                {canShare ? (
                  <span className="row">
                    <label className="visually-hidden" htmlFor={`scope-${g.principal_id}`}>Scope of {g.principal_id}</label>
                    <select id={`scope-${g.principal_id}`} value={g.scope}
                      onChange={(e) => act(() => api.post(`${path}/grants`, { principal_id: g.principal_id, scope: e.target.value }), `${g.principal_id} is now ${e.target.value}.`)}>
                      {SCOPES.map((s) => <option key={s} value={s}>{s}</option>)}
                    </select>
                    <button type="button" className="link-button" aria-label={`Remove the grant to ${g.principal_id}`}
                      onClick={() => act(() => api.del(`${path}/grants/${encodeURIComponent(g.principal_id)}`), `The grant to ${g.principal_id} is removed.`)}>
                      Remove
                    </button>
                  </span>
                ) : (
                  <span className="pill">{g.scope}</span>
                )}
              </li>
            ))}
          </ul>
          {canShare && (
            <form className="row wrap" onSubmit={async (e) => {
              e.preventDefault()
              if (!grantee.trim()) return
              if (await act(() => api.post(`${path}/grants`, { principal_id: grantee.trim(), scope }), `${grantee.trim()} has ${scope} access.`)) setGrantee('')
            }}>
              <div className="field grow">
                <label htmlFor="grantee">Share with</label>
                <input id="grantee" list="principals" value={grantee} onChange={(e) => setGrantee(e.target.value)} placeholder="user.bob, group.ops, public.all" />
              </div>
              <div className="field">
                <label htmlFor="grant-scope">Scope</label>
                <select id="grant-scope" value={scope} onChange={(e) => setScope(e.target.value as (typeof SCOPES)[number])}>
                  {SCOPES.map((s) => <option key={s} value={s}>{s}</option>)}
                </select>
              </div>
              <button type="submit">Grant</button>
            </form>
          )}
          <p className="muted small">viewer: read · runner: read and run · editor: read, run and edit.</p>
        </section>

        <section className="card" aria-labelledby="markings-title">
          <H id="markings-title">Markings</H>
          <p className="muted small">Only those who hold every marking of the {noun} can see it at all.</p>
          {a.markings.length === 0 && <p className="muted">No markings.</p>}
          <ul className="plain" data-testid="markings">
            {a.markings.map((m) => (
              <li key={m} className="row spread">
                <span className="pill marking">{m}</span>
                {canMark && (
                  <button type="button" className="link-button" aria-label={`Remove marking ${m}`}
                    onClick={() => act(() => api.del(`${path}/markings/${encodeURIComponent(m)}`), `${m} is removed.`)}>
                    Remove
                  </button>
                )}
              </li>
            ))}
          </ul>
          {canMark ? (
            markable.length ? (
              <form className="row" onSubmit={async (e) => {
                e.preventDefault()
                if (!marking) return
                if (await act(() => api.post(`${path}/markings`, { marking_id: marking }), `${marking} is added.`)) setMarking('')
              }}>
                <div className="field grow">
                  <label htmlFor="marking">Add a marking you hold</label>
                  <select id="marking" value={marking} onChange={(e) => setMarking(e.target.value)}>
                    <option value="">—</option>
                    {markable.map((m) => <option key={m} value={m}>{m}</option>)}
                  </select>
                </div>
                <button type="submit">Add marking</button>
              </form>
            ) : (
              <p className="muted small">You hold no other marking to add.</p>
            )
          ) : (
            <p className="muted small">Only an owner who holds a marking adds or removes it.</p>
          )}
        </section>
      </div>
    </div>
  )
}
