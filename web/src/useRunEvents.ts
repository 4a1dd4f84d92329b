import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import type { ApiError } from './api'
import { followRun } from './sse'
import type { RunEvent } from './types'

export interface RunEvents {
  /** the run these events are of (the state lags one render behind a change of run) */
  runId: string | null
  events: RunEvent[]
  ended: boolean
  connected: boolean
  error: ApiError | null
  /** reconnects at once, resuming after the last event (see followRun's poke) */
  refresh: () => void
}

/** Every event of the run, live: the stream from the first event, resumed after drops.
 * `onEvent` is called for each new one (after the state update is scheduled). */
export function useRunEvents(runId: string | null, onEvent?: (e: RunEvent) => void): RunEvents {
  const [state, setState] = useState<Omit<RunEvents, 'refresh'>>({ runId: null, events: [], ended: false, connected: false, error: null })
  const callback = useRef(onEvent)
  callback.current = onEvent
  const poke = useRef<() => void>(() => {})
  const refresh = useCallback(() => poke.current(), [])

  useEffect(() => {
    if (!runId) return
    const buffer: RunEvent[] = []
    let frame = 0
    setState({ runId, events: [], ended: false, connected: false, error: null })
    const flush = () => {
      frame = 0
      const batch = buffer.splice(0)
      if (batch.length) setState((s) => ({ ...s, events: [...s.events, ...batch] }))
    }
    const follower = followRun(runId, {
      onEvent: (e) => {
        buffer.push(e)
        if (!frame) frame = window.setTimeout(flush, 50)
        callback.current?.(e)
      },
      onEnd: () => {
        flush()
        setState((s) => ({ ...s, ended: true, connected: false }))
      },
      onError: (error) => setState((s) => ({ ...s, error })),
      onConnection: (connected) => setState((s) => ({ ...s, connected })),
    })
    poke.current = follower.poke
    return () => {
      poke.current = () => {}
      follower.stop()
      if (frame) window.clearTimeout(frame)
    }
  }, [runId])
  const fresh = useMemo(() => ({ runId, events: NONE, ended: false, connected: false, error: null }), [runId])
  const current = state.runId === runId ? state : fresh
  return useMemo(() => ({ ...current, refresh }), [current, refresh])
}

const NONE: RunEvent[] = []
