import { useCallback, useEffect, useRef, useState } from 'react'
import { ApiError } from './api'

export function formatTime(ms: number | null | undefined): string {
  if (!ms) return '—'
  const d = new Date(ms)
  return d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  })
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—'
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`
  const m = Math.floor(ms / 60_000)
  const s = Math.round((ms % 60_000) / 1000)
  return `${m} min ${s} s`
}

export function pretty(value: unknown): string {
  return JSON.stringify(value, null, 2) ?? 'null'
}

export function shortId(id: string): string {
  const dot = id.indexOf('.')
  return dot >= 0 && id.length > dot + 10 ? `${id.slice(0, dot + 1)}…${id.slice(-8)}` : id
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) return error.detail
  if (error instanceof Error) return error.message
  return String(error)
}

export interface AsyncState<T> {
  data: T | undefined
  error: unknown
  loading: boolean
  reload: () => void
  setData: (value: T) => void
}

/** Loads `load()` when `deps` change; `reload()` again on demand. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): AsyncState<T> {
  const [data, setData] = useState<T | undefined>(undefined)
  const [error, setError] = useState<unknown>(null)
  const [loading, setLoading] = useState(true)
  const [tick, setTick] = useState(0)
  const loader = useRef(load)
  loader.current = load
  useEffect(() => {
    const controller = new AbortController()
    setLoading(true)
    loader
      .current(controller.signal)
      .then((value) => {
        if (!controller.signal.aborted) {
          setData(value)
          setError(null)
        }
      })
      .catch((exc) => {
        if (!controller.signal.aborted) setError(exc)
      })
      .finally(() => {
        if (!controller.signal.aborted) setLoading(false)
      })
    return () => controller.abort()
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data, error, loading, reload, setData }
}

/** Calls `fn` every `ms` while the page is visible. */
export function useInterval(fn: () => void, ms: number | null): void {
  const saved = useRef(fn)
  saved.current = fn
  useEffect(() => {
    if (ms === null) return
    const id = window.setInterval(() => {
      if (document.visibilityState === 'visible') saved.current()
    }, ms)
    return () => window.clearInterval(id)
  }, [ms])
}

/** A cost in US dollars as the console shows it: "$0.000660" below a cent, "$1.23" above;
 * "—" when it is not known (no priced model call). */
export function formatCost(usd: unknown): string {
  if (typeof usd !== 'number') return '—'
  return usd !== 0 && Math.abs(usd) < 0.01 ? `$${usd.toFixed(6)}` : `$${usd.toFixed(2)}`
}

/** "1 message", "2 messages", "0 messages": the count with its noun, singular only for one. */
export function plural(count: number, noun: string, nouns = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : nouns}`
}

/** Why a run failed, in one line: the failed node and the error's message. */
export function failureReason(error: Record<string, unknown> | null | undefined, max = 160): string {
  if (!error) return ''
  const message = String(error.message ?? error.kind ?? 'failed')
  const node = typeof error.node_id === 'string' && error.node_id ? `${error.node_id}: ` : ''
  const text = `${node}${message}`
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}
