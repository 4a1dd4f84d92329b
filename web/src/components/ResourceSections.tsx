// The parts every resource page ends with (tables, templates, ontologies): its sharing and
// its versions; and its Delete button, which asks first and leaves a message on the list.

import { useState } from 'react'
import { api } from '../api'
import { flash } from '../flash'
import type { Owned } from '../resource'
import { navigate } from '../router'
import { ErrorBox } from './bits'
import { SharingPanel } from './SharingPanel'
import { VersionList } from './VersionList'

export function SharingAndVersions({ path, resource, noun, onChanged }: { path: string; resource: Owned; noun: string; onChanged: () => void }) {
  return (
    <>
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
