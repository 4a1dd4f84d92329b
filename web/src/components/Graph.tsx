import { useEffect, useMemo, useRef, useState } from 'react'
import { layoutAgent } from '../graph/layout'
import type { NodeRun, NodeState } from '../runstate'
import type { Agent } from '../types'

interface Props {
  agent: Pick<Agent, 'mode' | 'nodes' | 'edges' | 'agent'>
  runs?: Map<string, NodeRun>
  selected?: string | null
  onSelect?: (nodeId: string) => void
  label?: string
}

const STATE_TEXT: Record<NodeState, string> = {
  pending: 'not run', running: 'running', waiting: 'waiting', succeeded: 'succeeded',
  failed: 'failed', skipped: 'skipped', retrying: 'retrying', cancelled: 'cancelled',
}

function path(points: { x: number; y: number }[]): string {
  if (!points.length) return ''
  return points.map((p, i) => `${i ? 'L' : 'M'}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ')
}

/** The agent's graph as SVG; with `runs`, each node coloured by its state in the run. */
export function Graph({ agent, runs, selected, onSelect, label }: Props) {
  const layout = useMemo(() => layoutAgent(agent), [agent])
  const width = Math.max(layout.width, 200)
  const height = Math.max(layout.height, 60)
  // Wider than its box (a phone): fit it to the box's width, or show it at its size and
  // scroll inside the box; the page itself never scrolls sideways.
  const box = useRef<HTMLDivElement>(null)
  const [room, setRoom] = useState<number | null>(null)
  const [actual, setActual] = useState(false)
  useEffect(() => {
    const el = box.current
    if (!el || typeof ResizeObserver === 'undefined') return
    const watch = new ResizeObserver(() => setRoom(el.clientWidth))
    watch.observe(el)
    return () => watch.disconnect()
  }, [])
  const tooWide = room !== null && width > room - 16
  const fit = tooWide && !actual
  return (
    <div className="graph-box">
      {tooWide && (
        <button type="button" className="link-button graph-zoom" aria-pressed={actual} onClick={() => setActual((a) => !a)} data-testid="graph-zoom">
          {actual ? 'Fit to width' : 'Actual size (scroll)'}
        </button>
      )}
    <div className="graph-scroll" data-testid="graph" ref={box} data-fit={fit ? 'width' : 'actual'}>
      <svg
        className="graph"
        width={fit ? undefined : width}
        height={fit ? undefined : height}
        style={fit ? { width: '100%', height: 'auto', maxWidth: width } : undefined}
        viewBox={`0 0 ${width} ${height}`}
        role="group"
        aria-label={label ?? 'Workflow graph'}
      >
        <defs>
          <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
            <path d="M0,0 L10,5 L0,10 z" fill="#57606a" />
          </marker>
        </defs>
        {layout.clusters.map((c) => (
          <g key={c.id} className={`cluster cluster-${c.kind}`} aria-hidden="true">
            <rect x={c.x - c.width / 2} y={c.y - c.height / 2} width={c.width} height={c.height} rx={8} />
            <text x={c.x - c.width / 2 + 8} y={c.y - c.height / 2 + 13}>{c.label}</text>
          </g>
        ))}
        {layout.edges.map((e) => {
          const mid = e.points[Math.floor(e.points.length / 2)]
          return (
            <g key={e.id} className={`edge edge-${e.style}`} aria-hidden="true">
              <path d={path(e.points)} markerEnd="url(#arrow)" fill="none" />
              {e.label && mid && (
                <text x={mid.x + 4} y={mid.y - 3} className="edge-label">{e.label}</text>
              )}
            </g>
          )
        })}
        {layout.nodes.map((n) => {
          const run = n.nodeId ? runs?.get(n.nodeId) : undefined
          const state: NodeState | null = runs ? (n.nodeId ? run?.state ?? 'pending' : null) : null
          const clickable = Boolean(onSelect && n.nodeId)
          const satellite = Boolean(n.nodeId?.startsWith('tool:'))
          const describe = `${n.label}, ${n.kind}${state ? `, ${STATE_TEXT[state]}` : ''}`
          return (
            <g
              key={n.id}
              className={`node node-${n.kind}${state ? ` state-${state}` : ''}${selected && selected === n.nodeId ? ' selected' : ''}${satellite ? ' satellite' : ''}`}
              transform={`translate(${n.x - n.width / 2},${n.y - n.height / 2})`}
              data-testid={n.nodeId ? `graph-node-${n.nodeId}` : undefined}
              data-state={state ?? undefined}
              role={clickable ? 'button' : 'img'}
              tabIndex={clickable ? 0 : undefined}
              aria-label={describe}
              aria-pressed={clickable ? selected === n.nodeId : undefined}
              onClick={clickable ? () => onSelect!(n.nodeId!) : undefined}
              onKeyDown={clickable ? (ev) => {
                if (ev.key === 'Enter' || ev.key === ' ') {
                  ev.preventDefault()
                  onSelect!(n.nodeId!)
                }
              } : undefined}
            >
              <title>{describe}</title>
              <rect width={n.width} height={n.height} rx={satellite ? 18 : 6} />
              <text x={n.width / 2} y={19} textAnchor="middle" className="node-label">
                {n.label.length > 20 ? `${n.label.slice(0, 19)}…` : n.label}
              </text>
              <text x={n.width / 2} y={35} textAnchor="middle" className="node-kind">
                {n.kind}{state && state !== 'pending' ? ` · ${STATE_TEXT[state]}` : ''}
              </text>
            </g>
          )
        })}
      </svg>
    </div>
    </div>
  )
}
