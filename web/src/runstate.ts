// What a run's events say about each node: its state, timing, outputs and error.

import type { RunEvent, WorkflowNode } from './types'

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

/** Token usage: the run's own (saved when it ends), else the sum of what its nodes reported;
 * `model` is "demo" when the demo model answered a call. */
export function usageOf(runUsage: Record<string, unknown> | undefined, events: RunEvent[]): Record<string, number | string> {
  if (runUsage && Object.keys(runUsage).length) {
    const out: Record<string, number | string> = {}
    for (const [k, v] of Object.entries(runUsage)) if (typeof v === 'number' || k === 'model') out[k] = v as number | string
    if (Object.keys(out).length) return out
  }
  const total: Record<string, number | string> = {}
  for (const e of events) {
    if (e.type !== 'node.succeeded' && e.type !== 'node.failed' && e.type !== 'agent.message') continue
    const u = e.data.usage
    if (!u || typeof u !== 'object') continue
    const usage = u as Record<string, unknown>
    if (typeof usage.model === 'string') total.model = usage.model
    if (e.type === 'agent.message') continue // its node's node.succeeded sums its tokens
    for (const [k, v] of Object.entries(usage)) {
      if (typeof v === 'number') total[k] = Number(total[k] ?? 0) + v
    }
  }
  return total
}

/** Error handlers never run themselves: each takes the state of its handling of its target
 * (retrying it, then succeeded when a retry worked or it took over with `continue` or its
 * fallback, failed when it gave up); not run while the target never failed. */
export function withHandlers(states: Map<string, NodeRun>, nodes: WorkflowNode[]): Map<string, NodeRun> {
  const out = new Map(states)
  for (const node of nodes) {
    if (node.type !== 'error_handler') continue
    const target = states.get(String(node.config.target_node_id ?? ''))
    if (!target) continue
    const handled = target.events.filter((e) => e.type === 'node.retrying' || e.type === 'node.failed')
    if (!handled.length) continue
    const h = emptyNodeRun()
    h.events = handled
    h.frames = target.frames
    h.startedAt = handled[0].created_at
    const tookOver = handled.some((e) => e.type === 'node.failed' && e.data.handled_by === node.id)
    if (tookOver) h.state = 'succeeded'
    else if (target.state === 'failed' || target.state === 'cancelled') h.state = target.state
    else if (target.state === 'succeeded') h.state = 'succeeded' // a retry worked
    else h.state = 'retrying'
    if (h.state !== 'retrying') h.finishedAt = handled[handled.length - 1].created_at
    const retries = handled.filter((e) => e.type === 'node.retrying').length
    h.outputs = { retries, outcome: tookOver ? String(node.config.on_error ?? 'handled') : h.state === 'failed' ? 'gave up' : h.state === 'succeeded' ? 'a retry worked' : 'retrying' }
    out.set(node.id, h)
  }
  return out
}

/** One line about an event, for the timeline. */
export function summarize(event: RunEvent): string {
  const d = event.data
  const short = (v: unknown, n = 120) => {
    const s = typeof v === 'string' ? v : JSON.stringify(v)
    return s && s.length > n ? `${s.slice(0, n)}…` : s ?? ''
  }
  switch (event.type) {
    case 'node.started':
      return d.inputs !== undefined ? `inputs ${short(d.inputs)}` : ''
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
