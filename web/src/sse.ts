// A run's live event stream (GET /api/v1/runs/{id}/events with Accept: text/event-stream).
// EventSource cannot send an Authorization header, so the stream is read with fetch() and
// the frames are parsed here. A dropped stream is resumed with Last-Event-ID: every event
// arrives once, in order.

import { API, authHeaders, errorFrom, ApiError } from './api'
import type { RunEvent } from './types'

export const TERMINAL = new Set(['run.succeeded', 'run.failed', 'run.cancelled'])

export interface Frame {
  id: string | null
  event: string | null
  data: string
}

/** Splits a text/event-stream into frames; feed it chunks, it calls `onFrame` per frame. */
export class FrameParser {
  private buffer = ''
  private onFrame: (frame: Frame) => void

  constructor(onFrame: (frame: Frame) => void) {
    this.onFrame = onFrame
  }

  push(chunk: string): void {
    this.buffer += chunk.replace(/\r\n?/g, '\n')
    let end = this.buffer.indexOf('\n\n')
    while (end >= 0) {
      const block = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + 2)
      this.parse(block)
      end = this.buffer.indexOf('\n\n')
    }
  }

  private parse(block: string): void {
    let id: string | null = null
    let event: string | null = null
    const data: string[] = []
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue // a comment: keep-alive
      const colon = line.indexOf(':')
      const field = colon < 0 ? line : line.slice(0, colon)
      let value = colon < 0 ? '' : line.slice(colon + 1)
      if (value.startsWith(' ')) value = value.slice(1)
      if (field === 'id') id = value
      else if (field === 'event') event = value
      else if (field === 'data') data.push(value)
    }
    if (data.length) this.onFrame({ id, event, data: data.join('\n') })
  }
}

export interface FollowOptions {
  after?: number
  onEvent: (event: RunEvent) => void
  onError?: (error: ApiError) => void
  onEnd?: () => void
  /** Reports whether the stream is connected (false while it reconnects). */
  onConnection?: (connected: boolean) => void
}

/** Follows a run's events until it ends or `stop()` is called. `poke()` reconnects at once
 * (resuming after the last event): for when the run is known to have changed but the stream
 * has not said so yet. */
export function followRun(runId: string, options: FollowOptions): { stop: () => void; poke: () => void } {
  let controller = new AbortController()
  let last = options.after ?? 0
  let stopped = false
  let poked = false

  const run = async () => {
    let attempt = 0
    while (!stopped) {
      let ended = false
      controller = new AbortController()
      try {
        const response = await fetch(`${API}/runs/${encodeURIComponent(runId)}/events`, {
          headers: {
            ...authHeaders(),
            Accept: 'text/event-stream',
            ...(last > 0 ? { 'Last-Event-ID': String(last) } : {}),
          },
          signal: controller.signal,
        })
        if (!response.ok || !response.body) {
          const error = await errorFrom(response)
          options.onError?.(error)
          if (response.status < 500) return // 401, 403, 404: retrying will not help
          throw error
        }
        options.onConnection?.(true)
        attempt = 0
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        const parser = new FrameParser((frame) => {
          const event = JSON.parse(frame.data) as RunEvent
          if (event.seq <= last) return
          last = event.seq
          options.onEvent(event)
          if (TERMINAL.has(event.type)) ended = true
        })
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          parser.push(value)
        }
        if (ended) {
          options.onEnd?.()
          return
        }
        // The server closes the stream when the run ends: check, then resume if it did not.
        const check = await fetch(`${API}/runs/${encodeURIComponent(runId)}`, {
          headers: authHeaders(),
          signal: controller.signal,
        })
        if (check.ok) {
          const status = ((await check.json()) as { status: string }).status
          if (['succeeded', 'failed', 'cancelled'].includes(status)) {
            options.onEnd?.()
            return
          }
        }
      } catch (exc) {
        if (stopped) return
        if (poked) {
          poked = false
          continue
        }
        if (exc instanceof DOMException && exc.name === 'AbortError') return
      }
      if (poked) {
        poked = false
        continue
      }
      options.onConnection?.(false)
      attempt += 1
      await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)))
    }
  }
  void run()
  return {
    stop: () => {
      stopped = true
      controller.abort()
    },
    poke: () => {
      if (stopped) return
      poked = true
      controller.abort()
    },
  }
}
