import { createContext, useContext } from 'react'
import type { Me } from './types'

export interface Session {
  me: Me
  signOut: () => void
  /** pending tasks of the caller, refreshed in the background (for the nav badge) */
  taskCount: number
  refreshTasks: () => void
}

export const SessionContext = createContext<Session | null>(null)

export function useSession(): Session {
  const s = useContext(SessionContext)
  if (!s) throw new Error('useSession outside a signed-in page')
  return s
}
