// A resource's version history (GET {path}/versions, newest first): the number, who saved
// it and when. Every kind with the common envelope has the endpoint.

import { api } from '../api'
import type { AgentVersion } from '../types'
import { formatTime, useAsync } from '../util'
import { ErrorBox, Loading } from './bits'

/** `current` (the resource's version) is loaded into the key so that a save lists anew. */
export function VersionList({ path, current }: { path: string; current: number }) {
  const versions = useAsync((s) => api.get<{ data: AgentVersion[] }>(`${path}/versions`, s), [path, current])
  if (versions.error) return <ErrorBox error={versions.error} title="The versions cannot be listed" />
  if (!versions.data) return <Loading what="the versions" />
  return (
    <ol className="versions" data-testid="versions" reversed>
      {versions.data.data.map((v) => (
        <li key={v.version} data-testid="version" data-version={v.version}>
          <span aria-current={v.version === current ? 'true' : undefined}>Version {v.version}</span>{' '}
          <span className="muted small">{formatTime(v.created_at)} by {v.created_by}</span>
        </li>
      ))}
    </ol>
  )
}
