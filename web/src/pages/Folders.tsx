import { useCallback, useEffect, useState } from 'react'
import { api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { childrenOf, everything, folderLabel, pageOf } from '../folders'
import { href, navigate } from '../router'
import type { Placed } from '../types'
import { errorText, useAsync } from '../util'

/** Effective markings (its own and those above it) as badges. */
export function MarkingBadges({ markings }: { markings: string[] | undefined }) {
  if (!markings?.length) return null
  return (
    <span className="tags" data-testid="effective-markings">
      {markings.map((m) => <span key={m} className="pill marking" title="Only holders of this marking see it">{m}</span>)}
    </span>
  )
}

/** One folder or collection in the tree: a toggle that loads the folders in it, and a link
 * that selects it. */
function TreeNode({ node, selected, version }: { node: Placed; selected: string | null; version: number }) {
  const [open, setOpen] = useState(false)
  const [folders, setFolders] = useState<Placed[] | null>(null)
  const [error, setError] = useState<unknown>(null)

  useEffect(() => {
    if (!open) return
    const controller = new AbortController()
    childrenOf(node, controller.signal)
      .then((items) => setFolders(items.filter((i) => i.category === 'folder')))
      .catch((e) => !controller.signal.aborted && setError(e))
    return () => controller.abort()
  }, [open, node, version])

  const label = node.category === 'folder' ? folderLabel(node) : node.name
  return (
    <li data-testid="tree-node" data-name={node.name}>
      <button
        type="button"
        className="link-button tree-toggle"
        aria-expanded={open}
        aria-label={`${open ? 'Collapse' : 'Expand'} ${label}`}
        onClick={() => setOpen((o) => !o)}
      >
        {open ? '▾' : '▸'}
      </button>{' '}
      <a href={href(`/folders/${node.id}`)} aria-current={selected === node.id ? 'true' : undefined}>
        {label}
      </a>{' '}
      {node.category === 'collection' && <span className="muted small">collection</span>}
      <MarkingBadges markings={node.effective_markings} />
      {open && (
        <>
          <ErrorBox error={error} />
          {folders === null ? null : folders.length === 0 ? (
            <p className="muted small tree-empty">no folders</p>
          ) : (
            <ul className="tree">
              {folders.map((f) => <TreeNode key={f.id} node={f} selected={selected} version={version} />)}
            </ul>
          )}
        </>
      )}
    </li>
  )
}

export function FoldersPage({ selectedId }: { selectedId: string | null }) {
  const [version, setVersion] = useState(0) // bumped after a change: the tree reloads
  const roots = useAsync(
    async (s) => [await api.get<Placed>('/folders/home', s), ...(await everything('/collections', s))],
    [version],
  )
  const selectedPath = selectedId ? `/${selectedId.split('.')[0]}s/${encodeURIComponent(selectedId)}` : null
  const selected = useAsync((s) => (selectedPath ? api.get<Placed>(selectedPath, s) : Promise.resolve(null)), [selectedPath, version])
  const items = useAsync((s) => (selected.data ? childrenOf(selected.data, s) : Promise.resolve(null)), [selected.data])
  const [name, setName] = useState('')
  const [createError, setCreateError] = useState<string | null>(null)

  // With nothing selected, show the home folder.
  useEffect(() => {
    if (!selectedId && roots.data?.[0]) navigate(`/folders/${roots.data[0].id}`)
  }, [selectedId, roots.data])

  const create = useCallback(async () => {
    if (!selected.data || !name.trim()) return
    const where = selected.data.category === 'collection' ? { collection_id: selected.data.id } : { folder_id: selected.data.id }
    try {
      await api.post<Placed>('/folders', { name: name.trim(), ...where })
      setName('')
      setCreateError(null)
      setVersion((v) => v + 1)
    } catch (e) {
      setCreateError(errorText(e))
    }
  }, [selected.data, name])

  const here = selected.data
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Folders</span>} />
      <div className="folders-layout">
        <nav aria-label="Folder tree" className="card folder-tree">
          <ErrorBox error={roots.error} />
          {roots.data ? (
            <ul className="tree" data-testid="folder-tree">
              {roots.data.map((r) => <TreeNode key={r.id} node={r} selected={selectedId} version={version} />)}
            </ul>
          ) : (
            <Loading what="folders" />
          )}
        </nav>
        <div>
          <ErrorBox error={selected.error} title="This folder cannot be shown" />
          {here && (
            <>
              <h2 data-testid="selected-folder">
                {here.category === 'folder' ? folderLabel(here) : here.name}{' '}
                <span className="muted small"><code>{here.id}</code></span>
              </h2>
              <div className="meta">
                <span className="pill">{here.category === 'folder' && here.type === 'home' ? 'your home folder' : here.category}</span>
                <MarkingBadges markings={here.effective_markings} />
              </div>
              {here.type === 'home' && (
                <p className="muted small">What you create without choosing a folder goes here. A home folder passes nothing down: share a folder inside it instead.</p>
              )}
              <ErrorBox error={items.error} />
              {items.data === null || items.data === undefined ? (
                <Loading what="what is in it" />
              ) : items.data.length === 0 ? (
                <p className="muted">Nothing here that you can see.</p>
              ) : (
                <table className="table folder-children" data-testid="folder-children">
                  <thead>
                    <tr><th>Name</th><th>Kind</th><th>Markings</th></tr>
                  </thead>
                  <tbody>
                    {items.data.map((c) => {
                      const to = pageOf(c)
                      return (
                        <tr key={c.id} data-testid="folder-child" data-name={c.name} data-category={c.category}>
                          <td>{to ? <a href={href(to)}>{c.alias || c.name}</a> : c.alias || c.name}</td>
                          <td>{c.category}</td>
                          <td><MarkingBadges markings={c.effective_markings} /></td>
                        </tr>
                      )
                    })}
                  </tbody>
                </table>
              )}
              <form
                className="filters"
                aria-label="New folder"
                onSubmit={(e) => {
                  e.preventDefault()
                  void create()
                }}
              >
                <div className="field">
                  <label htmlFor="new-folder">New folder here</label>
                  <input id="new-folder" value={name} onChange={(e) => setName(e.target.value)} placeholder="name" />
                </div>
                <div className="field field-buttons">
                  <button type="submit" disabled={!name.trim()}>Create folder</button>
                </div>
              </form>
              {createError && <p className="error-box" role="alert">{createError}</p>}
            </>
          )}
        </div>
      </div>
    </section>
  )
}
