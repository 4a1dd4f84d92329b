// What the caller may do with an agent (or any resource with grants): `my_share_scope` says how it has access (owner, grant,
// admin); for a grant, the agent's grants say which scope (docs/access.md). A built-in agent
// (`is_builtin`) is everyone's to read and run and no one's to change, admins included: it is
// copied instead. The server checks every action anyway: this only keeps the console from
// offering what would be refused.

import { api } from './api'
import { useSession } from './session'
import type { Agent, Grant, Me } from './types'
import { useAsync } from './util'

export type Scope = 'owner' | 'admin' | 'editor' | 'runner' | 'viewer' | 'builtin'
export type Action = 'read' | 'run' | 'edit' | 'share'

const RANK: Record<Scope, number> = { viewer: 1, runner: 2, builtin: 2, editor: 3, admin: 4, owner: 5 }
const NEEDS: Record<Action, Scope> = { read: 'viewer', run: 'runner', edit: 'editor', share: 'admin' }

export const SCOPE_TEXT: Record<Scope, string> = {
  owner: 'owner: you may read, run, edit, share and delete it',
  admin: 'admin: you may read, run, edit, share and delete it',
  editor: 'editor (a grant): you may read, run and edit it',
  runner: 'runner (a grant): you may read and run it, not edit it',
  viewer: 'viewer (a grant): you may read it, not run or edit it',
  builtin: 'built-in: everyone may read and run it; copy it to change it',
}

export function can(scope: Scope | null, action: Action): boolean {
  return scope !== null && RANK[scope] >= RANK[NEEDS[action]]
}

/** The highest grant of `grants` to the caller (its user, its groups or everyone). */
export function grantedScope(me: Me, grants: Grant[]): Scope | null {
  const mine = new Set([me.id, ...me.groups, 'public.all'])
  let best: Scope | null = null
  for (const g of grants) {
    if (mine.has(g.principal_id) && (best === null || RANK[g.scope] > RANK[best])) best = g.scope
  }
  return best
}

/** The caller's scope on the agent; null while it is being worked out (or with no access). */
export function useMyScope(agent: Agent | undefined): Scope | null {
  return useScopeOn(agent ? `/agents/${agent.id}` : null, agent)
}

/** What a resource says of the caller's access (every kind's envelope has it). */
export interface Shared {
  id: string
  my_share_scope: 'owner' | 'grant' | 'admin' | null
  is_builtin?: boolean
}

/** The caller's scope on the resource at `path` (`/tables/ID`, any kind with grants); null
 * while it is being worked out (or with no access). */
export function useScopeOn(path: string | null, resource: Shared | undefined): Scope | null {
  const { me } = useSession()
  const how = resource?.my_share_scope ?? null
  const needsGrants = how === 'grant' && !me.is_admin && !resource?.is_builtin
  const grants = useAsync(
    (s) => (path && needsGrants ? api.get<{ data: Grant[] }>(`${path}/grants`, s) : Promise.resolve({ data: [] })),
    [path, needsGrants],
  )
  if (!resource || how === null) return null
  if (resource.is_builtin) return 'builtin'
  if (how === 'owner') return 'owner'
  if (me.is_admin) return 'admin'
  if (!grants.data) return null
  // A grant through a folder or collection is not among the resource's own: read at least.
  return grantedScope(me, grants.data.data) ?? 'viewer'
}
