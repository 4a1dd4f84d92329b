// The parts every resource page ends with (tables, templates, ontologies): its folder, its
// sharing and its versions; and its Delete button, which asks first and leaves a message on
// the list.

import { useState } from 'react'
import { api } from '../api'
import { flash } from '../flash'
import { everything, folderLabel } from '../folders'
import type { Owned } from '../resource'
import { href, navigate } from '../router'
import { can } from '../scope'
import type { Scope } from '../scope'
import { useAsync } from '../util'
import { ErrorBox } from './bits'
import { SharingPanel } from './SharingPanel'
import { VersionList } from './VersionList'

/** Its folder, sharing and versions; `scope` is the caller's (useScopeOn), which the page
 * has worked out for its own buttons. */
export function SharingAndVersions({ path, resource, noun, scope, onChanged }: { path: string; resource: Owned; noun: string; scope: Scope | null; onChanged: () => void }) {
  return (
    <>
      <FolderPlace path={path} resource={resource} canMove={can(scope, 'share')} onMoved={onChanged} />
      <h2 id="sharing-title">Sharing</h2>
      <SharingPanel path={path} resource={resource} noun={noun} onChanged={onChanged} embedded />
      <h2 id="versions-title">Versions</h2>
      <VersionList path={path} current={resource.version} />
    </>
  )
}

/** Delete, after a confirmation; then back to `listPath`, which shows that it is done. */
export function DeleteButton({ path, resource, noun, listPath, consequence }: { path: string; resource: Owned; noun: string; listPath: string; consequence?: string }) {
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const remove = async () => {
    if (!window.confirm(`Delete the ${noun} ${resource.name} and all its versions?${consequence ? ` ${consequence}` : ''}`)) return
    setBusy(true)
    try {
      await api.del(path)
      flash(listPath, `Deleted the ${noun} ${resource.name}.`)
      navigate(listPath)
    } catch (e) {
      setError(e)
      setBusy(false)
    }
  }
  return (
    <>
      <button type="button" className="danger" onClick={() => void remove()} disabled={busy}>{busy ? 'Deleting…' : 'Delete'}</button>
      {error ? <ErrorBox error={error} title="Cannot delete it" /> : null}
    </>
  )
}

/** The message another page left for this one (a deletion, a creation), shown once. */
export function Flashed({ text }: { text: string | null }) {
  return <div aria-live="polite">{text && <p className="success" role="status" data-testid="flash">{text}</p>}</div>
}

/** Which folder it is in, and (for those who may share it: moving changes who inherits
 * access through the folder) a select that moves it, as on an agent's page. */
function FolderPlace({ path, resource, canMove, onMoved }: { path: string; resource: Owned; canMove: boolean; onMoved: () => void }) {
  const folders = useAsync((s) => everything('/folders', s), [])
  const [error, setError] = useState<unknown>(null)
  const [moving, setMoving] = useState(false)
  const move = async (folderId: string) => {
    setMoving(true)
    setError(null)
    try {
      await api.patch(path, { folder_id: folderId })
      onMoved()
    } catch (e) {
      setError(e)
    } finally {
      setMoving(false)
    }
  }
  const known = folders.data ?? []
  const here = known.find((f) => f.id === resource.folder_id)
  return (
    <>
      <h2>Folder</h2>
      {canMove && known.length > 0 ? (
        <div className="field">
          <label htmlFor="resource-folder" className="sr-only">Move to folder</label>
          <select id="resource-folder" data-testid="resource-folder" value={resource.folder_id ?? ''} disabled={moving} onChange={(e) => void move(e.target.value)}>
            {!here && <option value={resource.folder_id ?? ''}>{resource.folder_id ?? '(none)'}</option>}
            {known.map((f) => <option key={f.id} value={f.id}>{folderLabel(f)}</option>)}
          </select>
        </div>
      ) : (
        <p>{here ? folderLabel(here) : <code>{resource.folder_id ?? '—'}</code>}</p>
      )}
      {resource.folder_id && <a className="small" href={href(`/folders/${resource.folder_id}`)}>Open the folder</a>}
      <ErrorBox error={error} title="Not moved" />
    </>
  )
}
