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

// -- leaving a page with unsaved work -------------------------------------------------------

let guard: string | null = null // the question to ask before leaving, while there is one
let shownHash = window.location.hash || '#/agents'
let confirmedHash: string | null = null // a link click already confirmed: do not ask again

/** While `question` is set, leaving the page (a link, Back, a reload, closing the tab) asks
 * it first; the page stays when the person says no. */
export function useLeaveGuard(question: string | null): void {
  useEffect(() => {
    guard = question
    if (!question) return
    const unload = (e: BeforeUnloadEvent) => {
      e.preventDefault()
      e.returnValue = question // browsers show their own sentence
    }
    // Links are asked about before the hash changes, so saying no leaves history untouched.
    const click = (e: MouseEvent) => {
      const link = (e.target as Element | null)?.closest?.('a[href^="#"]') as HTMLAnchorElement | null
      if (!link || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return
      const to = link.getAttribute('href') ?? ''
      if (to === window.location.hash || guard === null) return
      if (window.confirm(guard)) confirmedHash = to
      else e.preventDefault()
    }
    window.addEventListener('beforeunload', unload)
    document.addEventListener('click', click, true)
    return () => {
      guard = null
      window.removeEventListener('beforeunload', unload)
      document.removeEventListener('click', click, true)
    }
  }, [question])
}

/** Lets the next navigation through without asking (e.g. after saving). */
export function releaseLeaveGuard(): void {
  guard = null
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(window.location.hash))
  useEffect(() => {
    const update = () => {
      const hash = window.location.hash
      const confirmed = confirmedHash === hash
      confirmedHash = null
      // Back, Forward or a typed address: the hash has changed already; staying puts it back.
      if (guard !== null && !confirmed && hash !== shownHash && !window.confirm(guard)) {
        window.history.pushState(null, '', shownHash)
        return
      }
      shownHash = hash
      setRoute(parseHash(hash))
    }
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
