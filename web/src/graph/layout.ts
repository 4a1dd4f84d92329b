// An agent's graph laid out with dagre: workflow nodes and edges, loop bodies and parallel
// branches grouped in boxes (compound graph), error handlers beside what they guard. A react
// agent is drawn as start → agent → end with its tools, actors and roles around the agent.

import dagre from '@dagrejs/dagre'
import type { Agent, WorkflowNode } from '../types'

export interface LaidNode {
  id: string
  label: string
  kind: string
  x: number
  y: number
  width: number
  height: number
  /** the key of its state in a run: the event's node_id ("tool:<name>" for a react agent's
   * tools, actors and roles) */
  nodeId: string | null
}

export interface LaidCluster {
  id: string
  label: string
  kind: 'loop' | 'parallel' | 'branch'
  x: number
  y: number
  width: number
  height: number
}

export interface LaidEdge {
  id: string
  source: string
  target: string
  label: string | null
  style: 'flow' | 'body' | 'guard' | 'fallback' | 'uses'
  points: { x: number; y: number }[]
}

export interface Layout {
  width: number
  height: number
  nodes: LaidNode[]
  clusters: LaidCluster[]
  edges: LaidEdge[]
}

const NODE_W = 150
const NODE_H = 46

interface EdgeSpec {
  source: string
  target: string
  label: string | null
  style: LaidEdge['style']
  /** dagre: laid out and drawn along dagre's points; hidden: laid out only (keeps ranks);
   * straight: drawn after the layout, from `from` (a node, or a box's bottom) to the target */
  how: 'dagre' | 'hidden' | 'straight'
  from?: string
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
}

function itemName(item: unknown): string {
  if (typeof item === 'string') return item
  if (item && typeof item === 'object') {
    const o = item as Record<string, unknown>
    return String(o.name ?? o.id ?? '?')
  }
  return '?'
}

export function layoutAgent(agent: Pick<Agent, 'mode' | 'nodes' | 'edges' | 'agent'>): Layout {
  const g = new dagre.graphlib.Graph({ compound: true, multigraph: true })
  g.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 42, marginx: 12, marginy: 12 })
  g.setDefaultEdgeLabel(() => ({}))

  const labels = new Map<string, { label: string; kind: string; nodeId: string | null }>()
  const clusters = new Map<string, { label: string; kind: LaidCluster['kind'] }>()
  const edges: EdgeSpec[] = []

  const addNode = (id: string, label: string, kind: string, nodeId: string | null) => {
    labels.set(id, { label, kind, nodeId })
    g.setNode(id, { width: NODE_W, height: NODE_H })
  }

  if (agent.mode === 'react' || !agent.nodes?.length) {
    addNode('start', 'start', 'start', 'start')
    addNode('agent', 'agent', 'agent', 'agent')
    addNode('end', 'end', 'end', 'end')
    edges.push({ source: 'start', target: 'agent', label: null, style: 'flow', how: 'dagre' })
    edges.push({ source: 'agent', target: 'end', label: null, style: 'flow', how: 'dagre' })
    const config = (agent.agent ?? {}) as Record<string, unknown>
    for (const kind of ['tools', 'actors', 'roles'] as const) {
      const items = Array.isArray(config[kind]) ? (config[kind] as unknown[]) : []
      items.forEach((item, i) => {
        const id = `${kind}:${i}`
        // a run's tool.* events of this name colour it (runstate.ts: "tool:<name>")
        addNode(id, itemName(item), kind.slice(0, -1), `tool:${itemName(item)}`)
        edges.push({ source: 'agent', target: id, label: null, style: 'uses', how: 'dagre' })
      })
    }
  } else {
    const nodes: WorkflowNode[] = agent.nodes
    const known = new Set(nodes.map((n) => n.id))
    for (const n of nodes) addNode(n.id, n.id, n.type, n.id)
    const byId = new Map(nodes.map((n) => [n.id, n]))
    const bodyOf = (n: WorkflowNode): string[] => {
      if (n.type === 'loop') return strings(n.config.body_node_ids).filter((m) => known.has(m))
      if (n.type === 'parallel') {
        const branches = Array.isArray(n.config.branches) ? (n.config.branches as Record<string, unknown>[]) : []
        return branches.flatMap((b) => strings(b.node_ids)).filter((m) => known.has(m))
      }
      return []
    }
    const exitsOf = (id: string, seen: Set<string> = new Set()): string[] => {
      const n = byId.get(id)
      if (!n || seen.has(id)) return [id]
      seen.add(id)
      const body = bodyOf(n)
      if (!body.length) return [id]
      const inside = new Set(body)
      const exits = body.filter((m) => !(agent.edges ?? []).some((e) => e.source === m && inside.has(e.target)))
      return exits.flatMap((m) => exitsOf(m, seen))
    }
    // Containers: a box holding the container node and its body (nested boxes nest).
    for (const n of nodes) {
      if (n.type === 'loop') {
        const cid = `loop:${n.id}`
        clusters.set(cid, { label: `loop ${n.id}`, kind: 'loop' })
        g.setNode(cid, {})
        for (const child of strings(n.config.body_node_ids)) {
          if (!known.has(child)) continue
          g.setParent(child, cid)
        }
        for (const entry of entries(strings(n.config.body_node_ids), agent.edges)) {
          if (known.has(entry)) edges.push({ source: n.id, target: entry, label: 'each', style: 'body', how: 'dagre' })
        }
      } else if (n.type === 'parallel') {
        const cid = `parallel:${n.id}`
        clusters.set(cid, { label: `parallel ${n.id}`, kind: 'parallel' })
        g.setNode(cid, {})
        const branches = Array.isArray(n.config.branches) ? (n.config.branches as Record<string, unknown>[]) : []
        for (const branch of branches) {
          const bid = `branch:${n.id}:${String(branch.id)}`
          clusters.set(bid, { label: `branch ${String(branch.id)}`, kind: 'branch' })
          g.setNode(bid, {})
          g.setParent(bid, cid)
          const members = strings(branch.node_ids).filter((m) => known.has(m))
          for (const child of members) g.setParent(child, bid)
          for (const entry of entries(members, agent.edges)) {
            edges.push({ source: n.id, target: entry, label: String(branch.id), style: 'body', how: 'dagre' })
          }
        }
      } else if (n.type === 'error_handler') {
        // Beside what it guards: on the rank of its target (laid out after the target's
        // predecessors), with the "guards" line drawn across.
        const target = n.config.target_node_id
        if (typeof target === 'string' && known.has(target)) {
          for (const e of agent.edges ?? []) {
            if (e.target === target && known.has(e.source)) {
              for (const exit of exitsOf(e.source)) {
                edges.push({ source: exit, target: n.id, label: null, style: 'flow', how: 'hidden' })
              }
            }
          }
          edges.push({ source: n.id, target, label: 'guards', style: 'guard', how: 'straight', from: n.id })
        }
        const fallback = n.config.fallback_node_id
        if (typeof fallback === 'string' && known.has(fallback)) {
          edges.push({ source: n.id, target: fallback, label: 'fallback', style: 'fallback', how: 'dagre' })
        }
      }
    }
    // A container node sits in the box of its own container (if any), next to its body.
    for (const n of nodes) {
      if (n.type !== 'loop' && n.type !== 'parallel') continue
      const box = `${n.type}:${n.id}`
      const outer = g.parent(n.id)
      if (outer) g.setParent(box, outer)
      g.setParent(n.id, box)
    }
    // What follows a loop or parallel node comes after its whole box: laid out from the
    // body's last nodes, drawn from the box's bottom.
    for (const e of agent.edges ?? []) {
      if (!known.has(e.source) || !known.has(e.target)) continue
      const source = byId.get(e.source)!
      const label = e.condition ?? null
      if ((source.type === 'loop' || source.type === 'parallel') && bodyOf(source).length) {
        for (const exit of exitsOf(e.source)) {
          edges.push({ source: exit, target: e.target, label: null, style: 'flow', how: 'hidden' })
        }
        edges.push({ source: e.source, target: e.target, label, style: 'flow', how: 'straight', from: `${source.type}:${source.id}` })
      } else {
        edges.push({ source: e.source, target: e.target, label, style: 'flow', how: 'dagre' })
      }
    }
  }

  edges.forEach((e, i) => {
    if (e.how === 'straight') return
    const labelled = e.how === 'dagre' && e.label
    g.setEdge(e.source, e.target, {
      label: labelled ? e.label : undefined,
      width: labelled ? Math.min(120, e.label!.length * 7 + 8) : 0,
      height: labelled ? 16 : 0,
      minlen: 1,
      weight: e.how === 'hidden' ? 1 : e.style === 'flow' ? 3 : 1,
    }, `e${i}`)
  })

  dagre.layout(g)

  const graph = g.graph()
  const laidNodes: LaidNode[] = []
  for (const [id, meta] of labels) {
    const n = g.node(id)
    laidNodes.push({ id, ...meta, x: n.x ?? 0, y: n.y ?? 0, width: n.width, height: n.height })
  }
  const laidClusters: LaidCluster[] = []
  for (const [id, meta] of clusters) {
    const n = g.node(id)
    laidClusters.push({ id, ...meta, x: n.x ?? 0, y: n.y ?? 0, width: n.width ?? 0, height: n.height ?? 0 })
  }
  // Outer boxes first, so inner ones are drawn over them.
  const depth = (id: string): number => {
    let d = 0
    for (let p = g.parent(id); p; p = g.parent(p)) d++
    return d
  }
  laidClusters.sort((a, b) => depth(a.id) - depth(b.id))
  const box = (id: string) => {
    const n = g.node(id)
    return { x: n?.x ?? 0, y: n?.y ?? 0, width: n?.width ?? 0, height: n?.height ?? 0 }
  }
  const laidEdges: LaidEdge[] = []
  edges.forEach((e, i) => {
    if (e.how === 'hidden') return
    let points: { x: number; y: number }[]
    if (e.how === 'straight') {
      const from = box(e.from ?? e.source)
      const to = box(e.target)
      const isBox = clusters.has(e.from ?? '')
      const start = isBox ? { x: from.x, y: from.y + from.height / 2 } : clip(from, to)
      points = [start, clip(to, start)]
    } else {
      const data = g.edge({ v: e.source, w: e.target, name: `e${i}` })
      points = (data?.points ?? []) as { x: number; y: number }[]
    }
    laidEdges.push({ id: `e${i}`, source: e.source, target: e.target, label: e.label, style: e.style, points })
  })
  return {
    width: (graph.width as number) ?? 0,
    height: (graph.height as number) ?? 0,
    nodes: laidNodes,
    clusters: laidClusters,
    edges: laidEdges,
  }
}

/** The nodes of a body that no other node of the body leads to: where an iteration starts. */
function entries(members: string[], edges: { source: string; target: string }[]): string[] {
  const inside = new Set(members)
  const targets = new Set(edges.filter((e) => inside.has(e.source) && inside.has(e.target)).map((e) => e.target))
  return members.filter((m) => !targets.has(m))
}

/** Where the line from `rect`'s centre towards `toward` leaves the rectangle. */
function clip(rect: { x: number; y: number; width: number; height: number }, toward: { x: number; y: number }) {
  const dx = toward.x - rect.x
  const dy = toward.y - rect.y
  if (!dx && !dy) return { x: rect.x, y: rect.y }
  const w = rect.width / 2
  const h = rect.height / 2
  const scale = Math.abs(dy) * w > Math.abs(dx) * h ? h / Math.abs(dy) : w / Math.abs(dx)
  return { x: rect.x + dx * scale, y: rect.y + dy * scale }
}
