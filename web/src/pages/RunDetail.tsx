import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { api, downloadFile } from '../api'
import { ErrorBox, JsonBlock, KeyValues, Loading, PageHeader, StatusBadge } from '../components/bits'
import { Graph } from '../components/Graph'
import { TaskCard } from '../components/TaskCard'
import { href } from '../router'
import { DemoBanner } from '../components/Demo'
import { demoAnswered, isDemoUsage, useDemoProviders } from '../demo'
import { nodeRuns, summarize, usageOf, withHandlers } from '../runstate'
import type { NodeRun } from '../runstate'
import { useSession } from '../session'
import type { Agent, Artifact, Run, RunEvent, Task, WorkflowNode } from '../types'
import { useRunEvents } from '../useRunEvents'
import { errorText, formatCost, formatDuration, formatTime, plural, useAsync, useInterval } from '../util'

const FINISHED = new Set(['succeeded', 'failed', 'cancelled'])
const REFRESH_ON = new Set([
  'run.started', 'run.succeeded', 'run.failed', 'run.cancelled', 'node.waiting', 'input.received',
  'confirmation.received', 'artifact.created', 'tool.succeeded',
])

export function RunDetailPage({ runId }: { runId: string }) {
  const session = useSession()
  const run = useAsync((s) => api.get<Run>(`/runs/${runId}`, s), [runId])
  const agentKey = run.data ? `${run.data.agent_id}@${run.data.agent_version}` : null
  const agent = useAsync(
    (s) => (run.data ? api.get<Agent>(`/agents/${run.data.agent_id}/versions/${run.data.agent_version}`, s) : Promise.resolve(undefined)),
    [agentKey],
  )
  const reloadRun = run.reload
  const pending = useRef(0)
  const onEvent = useCallback((e: RunEvent) => {
    if (!REFRESH_ON.has(e.type)) return
    window.clearTimeout(pending.current)
    pending.current = window.setTimeout(() => {
      reloadRun()
      session.refreshTasks()
    }, 100)
  }, [reloadRun, session])
  const live = useRunEvents(runId, onEvent)
  const [selected, setSelected] = useState<string | null>(null)
  const [cancelError, setCancelError] = useState<string | null>(null)

  const status = run.data?.status
  const tasks = useAsync(
    async (s) => (status === 'waiting' ? (await api.get<{ data: Task[] }>('/tasks', s)).data.filter((t) => t.run_id === runId) : []),
    [status, runId, live.events.length > 0 ? live.events[live.events.length - 1].seq : 0],
  )
  // Safety net: the stream drives updates, but poll slowly while the run is not finished.
  useInterval(reloadRun, status && !FINISHED.has(status) ? 5000 : null)
  useEffect(() => () => window.clearTimeout(pending.current), [])
  // The run ended (as its row says) but the stream has not shown it yet: resume it now.
  const { refresh, ended } = live
  useEffect(() => {
    if (status && FINISHED.has(status) && !ended) refresh()
  }, [status, ended, refresh])

  const states = useMemo(
    () => withHandlers(nodeRuns(live.events), agent.data?.nodes ?? []),
    [live.events, agent.data],
  )
  const demo = useDemoProviders(agent.data)
  const answeredByDemo = isDemoUsage(run.data?.usage) || demoAnswered(live.events)
  const usage = useMemo(() => usageOf(run.data?.usage, live.events), [run.data?.usage, live.events])

  if (run.error) return <ErrorBox error={run.error} title="This run cannot be shown" />
  if (!run.data) return <Loading what="the run" />
  const r = run.data
  const doc = agent.data

  const cancel = async () => {
    setCancelError(null)
    try {
      run.setData(await api.post<Run>(`/runs/${r.id}/cancel`))
    } catch (e) {
      setCancelError(errorText(e))
    }
  }

  const node = selected && doc ? doc.nodes.find((n) => n.id === selected) ?? null : null
  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">Run <code className="run-id">{r.id}</code></span>}
        sub={
          <>
            <a href={href(`/agents/${r.agent_id}`)}>{doc ? doc.alias || doc.name : r.agent_id}</a> version {r.agent_version} · started by{' '}
            {r.user_id} · {formatTime(r.created_at)}
          </>
        }
      >
        <span aria-live="polite"><StatusBadge status={r.status} /></span>
        {!FINISHED.has(r.status) && (
          <button type="button" className="danger" onClick={cancel}>Cancel run</button>
        )}
      </PageHeader>
      {cancelError && <p className="error-box" role="alert">{cancelError}</p>}
      {live.error && <ErrorBox error={live.error} title="The event stream stopped" />}
      {answeredByDemo && (
        <DemoBanner
          providers={demo.length ? demo : [{ name: 'of this agent', configured: false, type: 'demo', demo: true, configure: null }]}
          what="This run's model answers came"
          testId="run-demo"
        />
      )}
      {r.status === 'waiting' && r.waiting && (
        <div className="notice" data-testid="waiting">
          Waiting for {String(r.waiting.for ?? '')}
          {r.waiting.node_id ? <> at <code>{String(r.waiting.node_id)}</code></> : null}
          {r.waiting.until ? <> until {formatTime(Number(r.waiting.until) * 1000)}</> : null}.{' '}
          {tasks.data && tasks.data.length === 0 && <>Someone else is asked; it shows in their <a href="#/tasks">tasks</a>.</>}
        </div>
      )}
      {tasks.data?.map((t) => (
        <TaskCard key={t.command_id} task={t} compact onDone={() => { tasks.reload(); reloadRun(); session.refreshTasks() }} />
      ))}

      <div className="run-layout">
        <div className="run-graph">
          <h2>Graph</h2>
          {doc ? (
            <Graph agent={doc} runs={states} selected={selected} onSelect={setSelected} label={`Graph of run ${r.id}: select a node for its details`} />
          ) : agent.error ? (
            <ErrorBox error={agent.error} />
          ) : (
            <Loading />
          )}
          <p className="muted small legend" aria-hidden="true">
            {['succeeded', 'running', 'waiting', 'failed', 'skipped', 'retrying'].map((state) => (
              <span key={state} className="legend-item"><span className={`swatch state-${state}`} /> {state}</span>
            ))}
          </p>
          {selected && (
            <NodePanel nodeId={selected} node={node} run={states.get(selected)} onClose={() => setSelected(null)} />
          )}
        </div>
        <div className="run-side">
          <h2>Outputs</h2>
          {r.outputs ? <KeyValues values={r.outputs} testId="run-outputs" /> : <p className="muted" data-testid="run-outputs-none">{FINISHED.has(r.status) ? 'None.' : 'Not yet.'}</p>}
          {r.error && (
            <>
              <h2>Error</h2>
              <div className="error-box" data-testid="run-error">
                {String(r.error.message ?? '')}
                <KeyValues values={r.error} />
              </div>
            </>
          )}
          <Artifacts runId={r.id} version={live.events.filter((e) => e.type === 'artifact.created' || e.type === 'tool.succeeded').length + (FINISHED.has(r.status) ? 1 : 0)} />
          <h2>Inputs</h2>
          <KeyValues values={r.inputs} />
          <h2>Usage</h2>
          {'cost_usd' in (r.usage ?? {}) && (
            <p data-testid="run-cost">
              Cost: <strong>{formatCost(r.usage.cost_usd)}</strong>
              {typeof r.usage.cost_note === 'string' && <span className="muted small"> ({r.usage.cost_note})</span>}
            </p>
          )}
          <KeyValues values={usage} empty="No model calls." testId="run-usage" />
          <h2>Timing</h2>
          <dl className="kv">
            <div className="kv-row"><dt>created</dt><dd>{formatTime(r.created_at)}</dd></div>
            <div className="kv-row"><dt>started</dt><dd>{formatTime(r.started_at)}</dd></div>
            <div className="kv-row"><dt>finished</dt><dd>{formatTime(r.finished_at)}</dd></div>
            <div className="kv-row"><dt>took</dt><dd>{r.finished_at && r.started_at ? formatDuration(r.finished_at - r.started_at) : '—'}</dd></div>
          </dl>
        </div>
      </div>
      <Timeline events={live.events} start={r.started_at ?? r.created_at} live={!live.ended} connected={live.connected} onNode={setSelected} />
    </section>
  )
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
}

/** The documents the run made (rendered templates), each downloadable as stored or converted. */
function Artifacts({ runId, version }: { runId: string; version: number }) {
  const found = useAsync((s) => api.get<{ data: Artifact[] }>(`/runs/${runId}/artifacts`, s), [runId, version])
  const [problem, setProblem] = useState<string | null>(null)
  const items = found.data?.data ?? []
  const download = async (a: Artifact, format?: 'html' | 'pdf') => {
    setProblem(null)
    const path = `/runs/${runId}/artifacts/${a.id}${format ? `?format=${format}` : ''}`
    try {
      await downloadFile(path, a.name)
    } catch (e) {
      setProblem(errorText(e))
    }
  }
  return (
    <>
      <h2>Artifacts</h2>
      {found.error ? (
        <ErrorBox error={found.error} />
      ) : items.length === 0 ? (
        <p className="muted" data-testid="run-artifacts-none">{found.data ? 'None.' : 'Loading…'}</p>
      ) : (
        <ul className="artifacts" data-testid="run-artifacts">
          {items.map((a) => (
            <li key={a.id} data-testid="run-artifact">
              <button type="button" className="link-button" onClick={() => download(a)} title={`Download ${a.name} (${a.media_type})`}>
                {a.name}
              </button>{' '}
              <span className="muted small">
                {formatSize(a.size)}{a.node_id ? <> · node <code>{a.node_id}</code></> : null}
              </span>
              {a.format && (
                <span className="artifact-formats">
                  {a.format !== 'html' && (
                    <button type="button" className="small" onClick={() => download(a, 'html')} aria-label={`Download ${a.name} as HTML`}>HTML</button>
                  )}
                  <button type="button" className="small" onClick={() => download(a, 'pdf')} aria-label={`Download ${a.name} as PDF`}>PDF</button>
                </span>
              )}
            </li>
          ))}
        </ul>
      )}
      {problem && <p className="error-box" role="alert">{problem}</p>}
    </>
  )
}

function NodePanel({ nodeId, node, run, onClose }: {
  nodeId: string; node: WorkflowNode | null; run: NodeRun | undefined; onClose: () => void
}) {
  const ref = useRef<HTMLElement>(null)
  useEffect(() => ref.current?.focus(), [nodeId])
  const config = node?.config ?? {}
  const mappings = (config.input_mappings ?? null) as Record<string, unknown> | null
  const streamed = (run?.events ?? [])
    .filter((e) => e.type === 'llm.delta' && e.data.kind === 'text' && !e.data.delegate)
    .map((e) => String(e.data.text ?? ''))
    .join('')
  const received = run?.events.filter((e) => e.type === 'input.received' || e.type === 'confirmation.received' || e.type === 'tool.called') ?? []
  // What the node started with, evaluated (each start: a retry, a loop iteration), latest last.
  const starts = (run?.events ?? []).filter((e) => e.type === 'node.started' && e.data.inputs !== undefined)
  const shownStarts = starts.slice(-10)
  return (
    <section className="card node-panel" ref={ref} tabIndex={-1} aria-labelledby="node-panel-title" data-testid="node-panel">
      <div className="row spread">
        <h3 id="node-panel-title">Node <code>{nodeId}</code> {node && <span className="muted small">{node.type}</span>}</h3>
        <button type="button" className="link-button" onClick={onClose}>Close</button>
      </div>
      <p>State: <strong data-testid="node-state">{run?.state ?? 'not run'}</strong>
        {run?.frames.size ? <span className="muted small"> · {run.frames.size === 1 ? 'frame' : 'frames'} {[...run.frames].join(', ')}</span> : null}
      </p>
      <dl className="kv">
        <div className="kv-row"><dt>started</dt><dd>{formatTime(run?.startedAt)}</dd></div>
        <div className="kv-row"><dt>finished</dt><dd>{formatTime(run?.finishedAt)}</dd></div>
        <div className="kv-row"><dt>took</dt><dd>{run?.startedAt && run.finishedAt ? formatDuration(run.finishedAt - run.startedAt) : '—'}</dd></div>
      </dl>
      <h4>Inputs</h4>
      {shownStarts.length ? (
        <div data-testid="node-inputs">
          {starts.length > shownStarts.length && <p className="muted small">The last {shownStarts.length} of {plural(starts.length, 'start')}:</p>}
          {shownStarts.map((e, i) => (
            <div key={e.seq} className="node-start">
              {(shownStarts.length > 1 || Boolean(e.data.frame)) && (
                <p className="muted small">
                  {typeof e.data.frame === 'string' && e.data.frame ? <>frame <code>{e.data.frame}</code> · </> : null}
                  started {formatTime(e.created_at)}{shownStarts.length > 1 && i === shownStarts.length - 1 ? ' (latest)' : ''}
                </p>
              )}
              <KeyValues values={e.data.inputs as Record<string, unknown>} empty="No inputs." />
            </div>
          ))}
        </div>
      ) : mappings && Object.keys(mappings).length ? (
        <>
          <p className="muted small">Not evaluated yet; as configured:</p>
          <KeyValues values={mappings} />
        </>
      ) : node?.type === 'error_handler' ? (
        <p className="muted">None: it acts when <code>{String(node.config.target_node_id ?? '')}</code> fails.</p>
      ) : (
        <p className="muted">{run?.startedAt ? 'It takes none.' : 'Not started.'}</p>
      )}
      {received.length > 0 && (
        <>
          <h4>Received</h4>
          {received.map((e) => <JsonBlock key={e.seq} value={e.data} />)}
        </>
      )}
      {streamed && (
        <>
          <h4>Streamed text</h4>
          <pre className="json streamed" data-testid="node-streamed">{streamed}</pre>
        </>
      )}
      <h4>Outputs</h4>
      {run?.outputs !== undefined ? <KeyValues values={run.outputs as Record<string, unknown>} testId="node-outputs" /> : <p className="muted">{run?.finishedAt ? 'None.' : 'None yet.'}</p>}
      {run?.error !== undefined && (
        <>
          <h4>Error</h4>
          <div className="error-box" data-testid="node-error"><KeyValues values={run.error as Record<string, unknown>} /></div>
        </>
      )}
      {node && (
        <details>
          <summary>Configuration</summary>
          <JsonBlock value={node.config} />
        </details>
      )}
      <details>
        <summary>Events of this node ({plural(run?.events.length ?? 0, 'event')})</summary>
        <ol className="plain">
          {run?.events.map((e) => <li key={e.seq}><code>#{e.seq}</code> {e.type} <span className="muted">{summarize(e)}</span></li>)}
        </ol>
      </details>
    </section>
  )
}

interface Item {
  key: number
  first: RunEvent
  count: number
  text: string
}

/** The event log, with consecutive deltas of one model call folded into one line. */
function Timeline({ events, start, live, connected, onNode }: {
  events: RunEvent[]; start: number; live: boolean; connected: boolean; onNode: (id: string) => void
}) {
  const items = useMemo(() => {
    const out: Item[] = []
    for (const e of events) {
      const last = out[out.length - 1]
      if (e.type === 'llm.delta' && last && last.first.type === 'llm.delta' && last.first.data.call === e.data.call && e.data.kind === 'text' && last.first.data.kind === 'text') {
        last.count += 1
        last.text += String(e.data.text ?? '')
        continue
      }
      out.push({ key: e.seq, first: e, count: 1, text: e.type === 'llm.delta' && e.data.kind === 'text' ? String(e.data.text ?? '') : summarize(e) })
    }
    return out
  }, [events])
  return (
    <section aria-labelledby="timeline-title" className="timeline-section">
      <h2 id="timeline-title">
        Timeline <span className="muted small">{plural(events.length, 'event')}{live ? (connected ? ' · live' : ' · connecting…') : ''}</span>
      </h2>
      <ol className="timeline" data-testid="timeline">
        {items.map((it) => (
          <li key={it.key} data-type={it.first.type} className={`ev ev-${it.first.type.replace(/\./g, '-')}`}>
            <span className="ev-seq">#{it.first.seq}</span>
            <span className="ev-time">+{formatDuration(it.first.created_at - start)}</span>
            <span className="ev-type">{it.first.type}{it.count > 1 ? ` ×${it.count}` : ''}</span>
            {it.first.node_id && (
              <button type="button" className="link-button ev-node" onClick={() => onNode(it.first.node_id!)}>
                {it.first.node_id}
              </button>
            )}
            {typeof it.first.data.frame === 'string' && it.first.data.frame && <span className="muted small">[{it.first.data.frame}]</span>}
            <span className="ev-text">{it.text.length > 300 ? `${it.text.slice(0, 300)}…` : it.text}</span>
          </li>
        ))}
      </ol>
    </section>
  )
}
