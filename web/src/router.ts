// Hash routing (#/agents, #/runs/<id>?...): the server serves one page at /, nothing else.

import { useEffect, useState } from 'react'

export interface Route {
  path: string
  parts: string[]
  params: URLSearchParams
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/agents'
  const [path, search = ''] = raw.split('?', 2)
  const clean = path.startsWith('/') ? path : `/${path}`
  return {
    path: clean,
    parts: clean.split('/').filter(Boolean).map(decodeURIComponent),
    params: new URLSearchParams(search),
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash))
  useEffect(() => {
    const update = () => setRoute(parseHash(window.location.hash))
    window.addEventListener('hashchange', update)
    return () => window.removeEventListener('hashchange', update)
  }, [])
  return route
}

export function href(path: string, params?: Record<string, string | undefined | null>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params ?? {})) if (v) q.set(k, v)
  const s = q.toString()
  return `#${path}${s ? `?${s}` : ''}`
}

export function navigate(path: string, params?: Record<string, string | undefined | null>): void {
  window.location.hash = href(path, params)
}

/** Replaces the query of the current route without adding a history entry. */
export function replaceParams(path: string, params: Record<string, string | undefined | null>): void {
  window.history.replaceState(null, '', href(path, params))
  window.dispatchEvent(new HashChangeEvent('hashchange'))
}
