// What a run's events say about each node: its state, timing, outputs and error.

import type { RunEvent } from './types'

export type NodeState =
  | 'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'skipped' | 'retrying' | 'cancelled'

export interface NodeRun {
  state: NodeState
  startedAt: number | null
  finishedAt: number | null
  outputs: unknown
  error: unknown
  data: Record<string, unknown> | null
  events: RunEvent[]
  frames: Set<string>
}

export function emptyNodeRun(): NodeRun {
  return {
    state: 'pending', startedAt: null, finishedAt: null, outputs: undefined, error: undefined,
    data: null, events: [], frames: new Set(),
  }
}

const STATE_OF: Record<string, NodeState> = {
  'node.started': 'running',
  'node.succeeded': 'succeeded',
  'node.failed': 'failed',
  'node.skipped': 'skipped',
  'node.waiting': 'waiting',
  'node.retrying': 'retrying',
  'input.received': 'running',
  'confirmation.received': 'running',
  'branch.cancelled': 'cancelled',
}

export function nodeRuns(events: RunEvent[]): Map<string, NodeRun> {
  const out = new Map<string, NodeRun>()
  for (const event of events) {
    trackTool(out, event)
    if (!event.node_id) {
      if (event.type === 'run.cancelled' || event.type === 'run.failed') {
        for (const n of out.values()) {
          if (n.state === 'running' || n.state === 'waiting' || n.state === 'retrying') {
            n.state = event.type === 'run.cancelled' ? 'cancelled' : n.state === 'running' ? 'failed' : n.state
          }
        }
      }
      continue
    }
    let n = out.get(event.node_id)
    if (!n) {
      n = emptyNodeRun()
      out.set(event.node_id, n)
    }
    n.events.push(event)
    const frame = event.data.frame
    if (typeof frame === 'string' && frame) n.frames.add(frame)
    const state = STATE_OF[event.type]
    if (state) n.state = state
    if (event.type === 'node.started') {
      if (n.startedAt === null) n.startedAt = event.created_at
      n.finishedAt = null
    }
    if (event.type === 'node.succeeded' || event.type === 'node.failed' || event.type === 'node.skipped') {
      n.finishedAt = event.created_at
      n.data = event.data
    }
    if (event.type === 'node.succeeded') n.outputs = event.data.outputs
    if (event.type === 'node.failed') n.error = event.data.error
  }
  return out
}

const TOOL_STATE: Record<string, NodeState> = {
  'tool.called': 'running', 'tool.succeeded': 'succeeded', 'tool.failed': 'failed',
}

/** A react agent's tool calls, under "tool:<name>" (its last call's state). */
function trackTool(out: Map<string, NodeRun>, event: RunEvent): void {
  const d = event.data
  if (d.delegate) return
  let name: string | null = null
  if (TOOL_STATE[event.type] && typeof d.name === 'string') name = d.name
  else if (event.type === 'node.waiting' && typeof d.actor === 'string') name = d.actor
  if (!name) return
  const key = `tool:${name}`
  let n = out.get(key)
  if (!n) {
    n = emptyNodeRun()
    out.set(key, n)
  }
  n.events.push(event)
  n.state = TOOL_STATE[event.type] ?? 'waiting'
  if (event.type === 'tool.called') {
    n.startedAt = event.created_at
    n.finishedAt = null
    n.outputs = undefined
    n.error = undefined
  } else if (event.type === 'tool.succeeded') {
    n.finishedAt = event.created_at
    n.outputs = { result: d.result }
  } else if (event.type === 'tool.failed') {
    n.finishedAt = event.created_at
    n.error = d.error
  }
}

/** Token usage: the run's own, else the sum of what its nodes reported. */
export function usageOf(runUsage: Record<string, unknown> | undefined, events: RunEvent[]): Record<string, number> {
  if (runUsage && Object.keys(runUsage).length) {
    const out: Record<string, number> = {}
    for (const [k, v] of Object.entries(runUsage)) if (typeof v === 'number') out[k] = v
    if (Object.keys(out).length) return out
  }
  const total: Record<string, number> = {}
  for (const e of events) {
    if (e.type !== 'node.succeeded' && e.type !== 'node.failed') continue
    const u = e.data.usage
    if (!u || typeof u !== 'object') continue
    for (const [k, v] of Object.entries(u as Record<string, unknown>)) {
      if (typeof v === 'number') total[k] = (total[k] ?? 0) + v
    }
  }
  return total
}

/** One line about an event, for the timeline. */
export function summarize(event: RunEvent): string {
  const d = event.data
  const short = (v: unknown, n = 120) => {
    const s = typeof v === 'string' ? v : JSON.stringify(v)
    return s && s.length > n ? `${s.slice(0, n)}…` : s ?? ''
  }
  switch (event.type) {
    case 'node.succeeded':
    case 'run.succeeded':
      return d.outputs && Object.keys(d.outputs as object).length ? `outputs ${short(d.outputs)}` : ''
    case 'node.failed':
    case 'run.failed':
      return short((d.error as Record<string, unknown> | undefined)?.message ?? d.error)
    case 'node.waiting':
      return `waits for ${String(d.waiting_for ?? '')}${d.actor ? ` (${String(d.actor)})` : ''}`
    case 'node.retrying':
      return `attempt ${String(d.attempts ?? '')}, in ${String(d.delay ?? '')} s`
    case 'llm.delta':
      return d.kind === 'tool_call' ? `tool call ${String(d.name ?? '')} ${short(d.arguments ?? '')}` : short(d.text ?? '')
    case 'agent.message':
      return short(d.content) || (Array.isArray(d.tool_calls) ? `calls ${(d.tool_calls as { name: string }[]).map((c) => c.name).join(', ')}` : '')
    case 'tool.called':
      return `${String(d.name)}(${short(d.arguments, 80)})`
    case 'tool.succeeded':
      return `${String(d.name)} → ${short(d.result, 100)}`
    case 'tool.failed':
      return `${String(d.name)} failed: ${short(d.error)}`
    case 'confirmation.received':
      return `${d.approve ? 'approved' : 'rejected'} by ${String(d.by ?? '')}${d.reason ? `: ${String(d.reason)}` : ''}`
    case 'input.received':
      return `answered${d.by ? ` by ${String(d.by)}` : ''}`
    default: {
      const rest = { ...d }
      delete rest.frame
      return Object.keys(rest).length ? short(rest) : ''
    }
  }
}
