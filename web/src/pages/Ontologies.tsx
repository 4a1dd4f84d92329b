// Ontologies (docs/ontologies.md): the list, and one ontology's object types with a
// searchable list of its objects; an object shows its properties and what it links to. A new
// one and an import of objects are OntologyForms; sharing, versions and delete are here.

import { useState } from 'react'
import { api, query } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { DeleteButton, Flashed, SharingAndVersions } from '../components/ResourceSections'
import { takeFlash } from '../flash'
import { everything } from '../folders'
import type { Owned } from '../resource'
import { href } from '../router'
import { can, useScopeOn } from '../scope'
import type { Page } from '../types'
import { useAsync } from '../util'
import { MarkingBadges } from './Folders'
import { ImportData, NewOntology, OntologyEditor } from './OntologyForms'

interface Property { name: string; type: string; required?: boolean; description?: string }
interface ObjectType { name: string; description?: string; properties: Property[]; primary_key: string; title_property?: string | null }
interface LinkType { name: string; from_type: string; to_type: string; cardinality: string; inverse?: string | null }
interface Ontology extends Owned { object_types: ObjectType[]; link_types: LinkType[] }
interface OntologyObject { type: string; key: string; title: string; properties: Record<string, unknown> }

const base = (id: string) => `/ontologies/${encodeURIComponent(id)}`

export function OntologiesPage({ ontologyId, sub }: { ontologyId: string | null; sub?: string | null }) {
  if (ontologyId === 'new') return <NewOntology />
  if (ontologyId && sub === 'edit') return <OntologyEditor ontologyId={ontologyId} />
  return ontologyId ? <OntologyDetail key={ontologyId} ontologyId={ontologyId} /> : <OntologyList />
}

function OntologyList() {
  const list = useAsync((s) => everything('/ontologies', s) as Promise<Ontology[]>, [])
  const [flashed] = useState(() => takeFlash('/ontologies'))
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Ontologies</span>}>
        <a className="button primary" href={href('/ontologies/new')}>New ontology</a>
      </PageHeader>
      <Flashed text={flashed} />
      <ErrorBox error={list.error} />
      {list.loading ? <Loading what="ontologies" /> : !list.data?.length ? (
        <p className="muted">No ontologies you can read.</p>
      ) : (
        <ul className="agent-list" data-testid="ontology-list">
          {list.data.map((o) => (
            <li key={o.id} className="card agent-card" data-testid="ontology-item" data-name={o.name}>
              <div className="agent-card-head">
                <a href={href(`/ontologies/${o.id}`)} className="agent-name">{o.alias || o.name}</a>
                <MarkingBadges markings={o.effective_markings} />
              </div>
              <p className="agent-desc">{o.description || <span className="muted">No description.</span>}</p>
              <div className="meta">
                {(o.object_types ?? []).map((t) => <span key={t.name} className="pill">{t.name}</span>)}
                <span className="muted small">v{o.version}</span>
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}

function OntologyDetail({ ontologyId }: { ontologyId: string }) {
  const ontology = useAsync((s) => api.get<Ontology>(base(ontologyId), s), [ontologyId])
  const [flashed] = useState(() => takeFlash(ontologyId))
  const scope = useScopeOn(base(ontologyId), ontology.data)
  const [type, setType] = useState('')
  const [q, setQ] = useState('')
  const [filter, setFilter] = useState('')
  const [search, setSearch] = useState({ type: '', q: '', filter: '' })
  const [selected, setSelected] = useState<OntologyObject | null>(null)
  const [extra, setExtra] = useState<{ items: OntologyObject[]; cursor: string | null } | null>(null)
  const page = useAsync((s) => {
    setExtra(null)
    const params = query({ type: search.type, q: search.q, filter: search.filter, limit: 50 })
    return api.get<Page<OntologyObject>>(`${base(ontologyId)}/objects${params}`, s)
  }, [ontologyId, search])
  const cursor = extra ? extra.cursor : page.data?.next_cursor ?? null
  const objects = [...(page.data?.data ?? []), ...(extra?.items ?? [])]
  const more = async () => {
    const params = query({ type: search.type, q: search.q, filter: search.filter, limit: 50, cursor })
    const next = await api.get<Page<OntologyObject>>(`${base(ontologyId)}/objects${params}`)
    setExtra({ items: [...(extra?.items ?? []), ...next.data], cursor: next.next_cursor })
  }
  // Reloading (after a change of its sharing) keeps the page: only the first load shows this.
  if (!ontology.data) return ontology.error ? <ErrorBox error={ontology.error} /> : <Loading what="the ontology" />
  const o = ontology.data
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">{o.alias || o.name}</span>} sub={o.description}>
        <a className="button" href={href('/ontologies')}>All ontologies</a>
        {can(scope, 'edit') && <a className="button" href={href(`/ontologies/${o.id}/edit`)}>Edit</a>}
        {can(scope, 'share') && <DeleteButton path={base(o.id)} resource={o} noun="ontology" listPath="/ontologies" consequence="Its objects and links are deleted with it." />}
      </PageHeader>
      <Flashed text={flashed} />
      <div className="meta">
        <code>{o.id}</code> <span className="pill">version {o.version}</span>
        <MarkingBadges markings={o.effective_markings} />
      </div>
      <h2>Object types</h2>
      <ul data-testid="object-types">
        {o.object_types.map((t) => (
          <li key={t.name} data-testid="object-type" data-name={t.name}>
            <strong>{t.name}</strong> <span className="muted small">key {t.primary_key}</span>{' '}
            {t.description && <span className="muted">— {t.description}</span>}
            <div className="small">
              {t.properties.map((p) => `${p.name}: ${p.type}${p.required ? '*' : ''}`).join(', ')}
            </div>
          </li>
        ))}
      </ul>
      {o.link_types.length > 0 && (
        <p className="small" data-testid="link-types">
          Links: {o.link_types.map((l) => `${l.name} (${l.from_type} → ${l.to_type}, ${l.cardinality})`).join('; ')}
        </p>
      )}
      <h2>Objects</h2>
      <form className="filters" role="search" aria-label="Search objects"
        onSubmit={(e) => { e.preventDefault(); setSelected(null); setSearch({ type, q, filter: type ? filter : '' }) }}>
        <div className="field">
          <label htmlFor="object-type">Type</label>
          <select id="object-type" value={type} onChange={(e) => setType(e.target.value)}>
            <option value="">any</option>
            {o.object_types.map((t) => <option key={t.name} value={t.name}>{t.name}</option>)}
          </select>
        </div>
        <div className="field">
          <label htmlFor="object-q">Search</label>
          <input id="object-q" type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="words in the title or text" />
        </div>
        <div className="field">
          <label htmlFor="object-filter">Filter</label>
          <input id="object-filter" value={filter} onChange={(e) => setFilter(e.target.value)}
            placeholder="property:op:value" disabled={!type} title="Pick a type to filter by its properties" />
        </div>
        <div className="field field-buttons"><button type="submit">Search</button></div>
      </form>
      <ErrorBox error={page.error} />
      {page.loading ? <Loading what="objects" /> : objects.length === 0 ? <p className="muted">No objects match.</p> : (
        <table data-testid="object-list">
          <thead><tr><th>Type</th><th>Key</th><th>Title</th></tr></thead>
          <tbody>
            {objects.map((obj) => (
              <tr key={`${obj.type}/${obj.key}`} data-testid="object-row" data-key={obj.key}>
                <td>{obj.type}</td>
                <td><button type="button" className="link-button" onClick={() => setSelected(obj)}>{obj.key}</button></td>
                <td>{obj.title}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {cursor && <button type="button" onClick={more}>Load more</button>}
      {selected && <ObjectView ontology={o} object={selected} onPick={setSelected} />}
      {can(scope, 'edit') && (
        <>
          <h2>Import objects and links</h2>
          <ImportData ontologyId={o.id} onDone={() => { setSelected(null); page.reload() }} />
        </>
      )}
      <SharingAndVersions scope={scope} path={base(o.id)} resource={o} noun="ontology" onChanged={ontology.reload} />
    </section>
  )
}

function ObjectView({ ontology, object, onPick }: { ontology: Ontology; object: OntologyObject; onPick: (o: OntologyObject) => void }) {
  // Every way to follow a link from this object's type: forward by name, backward by inverse.
  const ways = ontology.link_types.flatMap((l) => [
    ...(l.from_type === object.type ? [{ label: l.name, path: l.name, reverse: false }] : []),
    ...(l.to_type === object.type ? [{ label: l.inverse || `${l.name} (backwards)`, path: l.inverse || l.name, reverse: !l.inverse }] : []),
  ])
  const linked = useAsync(async (s) => {
    const path = `${base(ontology.id)}/objects/${encodeURIComponent(object.type)}/${encodeURIComponent(object.key)}/links/`
    return Promise.all(ways.map((w) => api.get<Page<OntologyObject>>(`${path}${encodeURIComponent(w.path)}${query({ reverse: w.reverse ? 'true' : undefined, limit: 20 })}`, s)))
  }, [ontology.id, object.type, object.key])
  return (
    <div className="card" data-testid="object-view">
      <h3>{object.type} {object.title}</h3>
      <dl>
        {Object.entries(object.properties).map(([k, v]) => (
          <div key={k}><dt>{k}</dt><dd>{typeof v === 'string' ? v : JSON.stringify(v)}</dd></div>
        ))}
      </dl>
      <ErrorBox error={linked.error} />
      {ways.map((w, i) => (
        <p key={w.label} className="small" data-testid="object-links" data-link={w.label}>
          <strong>{w.label}:</strong>{' '}
          {(linked.data?.[i]?.data ?? []).map((t) => (
            <button key={`${t.type}/${t.key}`} type="button" className="link-button" onClick={() => onPick(t)}>{t.title}</button>
          ))}
          {linked.data && !linked.data[i]?.data.length && <span className="muted">none</span>}
        </p>
      ))}
    </div>
  )
}
