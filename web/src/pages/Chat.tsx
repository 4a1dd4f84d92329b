import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { api, query } from '../api'
import { ErrorBox, KeyValues, Loading, PageHeader } from '../components/bits'
import { TaskCard } from '../components/TaskCard'
import { href } from '../router'
import { useSession } from '../session'
import type { Agent, Conversation, ConversationSummary, Page, Run, RunEvent, Task } from '../types'
import { useRunEvents } from '../useRunEvents'
import { DemoBanner, DemoLabel } from '../components/Demo'
import { demoAnswered, isDemoUsage, useDemoProviders } from '../demo'
import { can, useMyScope } from '../scope'
import { errorText, formatTime, plural, pretty, shortId, useAsync } from '../util'

export function ChatPage({ agentId, conversationId }: { agentId: string | null; conversationId: string | null }) {
  if (!agentId) return <ChatAgents />
  return <ChatWithAgent agentId={agentId} initialConversation={conversationId} />
}

function ChatAgents() {
  const agents = useAsync((s) => api.get<Page<Agent>>(`/agents${query({ input_mode: 'chat', limit: 200 })}`, s), [])
  const mine = useAsync((s) => api.get<Page<ConversationSummary>>(`/conversations${query({ limit: 20 })}`, s), [])
  const names = new Map((agents.data?.data ?? []).map((a) => [a.id, a.alias || a.name]))
  const list = mine.data?.data ?? []
  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Chat</span>} sub="Talk to a chat agent." />
      <ErrorBox error={agents.error} />
      {!agents.data ? (
        <Loading what="chat agents" />
      ) : agents.data.data.length === 0 ? (
        <p className="muted">No chat agents. A react agent with <code>input_mode: chat</code> is one.</p>
      ) : (
        <ul className="agent-list">
          {agents.data.data.map((a) => (
            <li key={a.id} className="card agent-card" data-testid="chat-agent" data-name={a.name}>
              <a className="agent-name" href={href(`/chat/${a.id}`)}>{a.alias || a.name}</a>
              <p className="agent-desc">{a.description}</p>
            </li>
          ))}
        </ul>
      )}
      <ErrorBox error={mine.error} />
      {list.length > 0 && (
        <>
          <h2>Your recent conversations</h2>
          <ul className="plain" data-testid="conversations">
            {list.map((c) => (
              <li key={c.id}>
                <a href={href(`/chat/${c.agent_id}/${c.id}`)}>
                  {names.get(c.agent_id) ?? c.agent_id}: {plural(c.message_count, 'message')}
                </a>{' '}
                <span className="muted small">{formatTime(c.updated_at)}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  )
}

type Block =
  | { kind: 'text'; key: string; text: string }
  | { kind: 'tool'; key: string; callId: string; name: string; category: string; args: unknown; status: 'running' | 'waiting' | 'succeeded' | 'failed' | 'rejected'; result?: unknown; error?: unknown; decision?: string }
  | { kind: 'error'; key: string; text: string }

/** What the events of one turn show: the streamed text and the tool calls, in order. */
function blocksOf(events: RunEvent[]): Block[] {
  const blocks: Block[] = []
  const texts = new Map<string, Extract<Block, { kind: 'text' }>>()
  const tools = new Map<string, Extract<Block, { kind: 'tool' }>>()
  let textSinceMessage = false
  for (const e of events) {
    const d = e.data
    if (d.delegate) continue // a role's own loop: its result shows on the role's call
    switch (e.type) {
      case 'llm.delta': {
        if (d.kind !== 'text') break
        const call = String(d.call ?? '')
        let block = texts.get(call)
        if (!block) {
          block = { kind: 'text', key: `t${e.seq}`, text: '' }
          texts.set(call, block)
          blocks.push(block)
        }
        block.text += String(d.text ?? '')
        textSinceMessage = true
        break
      }
      case 'agent.message':
        if (!textSinceMessage && typeof d.content === 'string' && d.content) {
          blocks.push({ kind: 'text', key: `m${e.seq}`, text: d.content })
        }
        textSinceMessage = false
        break
      case 'tool.called': {
        const block: Extract<Block, { kind: 'tool' }> = {
          kind: 'tool', key: `c${e.seq}`, callId: String(d.call_id), name: String(d.name),
          category: String(d.category ?? 'tool'), args: d.arguments, status: 'running',
        }
        tools.set(block.callId, block)
        blocks.push(block)
        break
      }
      case 'node.waiting': {
        const b = tools.get(String(d.call_id ?? ''))
        if (b) b.status = 'waiting'
        break
      }
      case 'confirmation.received': {
        const b = tools.get(String(d.call_id ?? ''))
        if (b) {
          b.decision = `${d.approve ? 'approved' : 'rejected'} by ${String(d.by ?? '')}${d.reason ? `: ${String(d.reason)}` : ''}`
          b.status = d.approve ? 'running' : 'rejected'
        }
        break
      }
      case 'tool.succeeded': {
        const b = tools.get(String(d.call_id ?? ''))
        if (b) {
          b.status = 'succeeded'
          b.result = d.result
        }
        break
      }
      case 'tool.failed': {
        const b = tools.get(String(d.call_id ?? ''))
        if (b) {
          b.status = b.status === 'rejected' ? 'rejected' : 'failed'
          b.error = d.error
        }
        break
      }
      case 'run.failed': {
        const err = d.error as Record<string, unknown> | undefined
        blocks.push({ kind: 'error', key: `f${e.seq}`, text: `The turn failed: ${String(err?.message ?? pretty(err))}` })
        break
      }
      case 'run.cancelled':
        blocks.push({ kind: 'error', key: `x${e.seq}`, text: 'The turn was cancelled.' })
        break
    }
  }
  return blocks
}

function ToolBlock({ block }: { block: Extract<Block, { kind: 'tool' }> }) {
  return (
    <div className={`tool-call tool-${block.status}`} data-testid="tool-call" data-name={block.name} data-status={block.status}>
      <div className="tool-head">
        <span className="pill">{block.category}</span> <strong>{block.name}</strong>{' '}
        <span className="tool-status">{block.status}</span>
      </div>
      <code className="tool-args">{JSON.stringify(block.args)}</code>
      {block.decision && <div className="muted small">{block.decision}</div>}
      {block.result !== undefined && <div className="tool-result">→ <code>{JSON.stringify(block.result)}</code></div>}
      {block.error !== undefined && <div className="field-error">{typeof block.error === 'string' ? block.error : JSON.stringify(block.error)}</div>}
    </div>
  )
}

function ChatWithAgent({ agentId, initialConversation }: { agentId: string; initialConversation: string | null }) {
  const session = useSession()
  const agent = useAsync((s) => api.get<Agent>(`/agents/${agentId}`, s), [agentId])
  const [conversationId, setConversationId] = useState<string | null>(initialConversation)
  const [conversation, setConversation] = useState<Conversation | null>(null)
  const [loadError, setLoadError] = useState<unknown>(null)
  const [activeRun, setActiveRun] = useState<string | null>(null)
  const [turns, setTurns] = useState<Record<string, RunEvent[]>>({})
  const [tasks, setTasks] = useState<Task[]>([])
  const [draft, setDraft] = useState('')
  const [sendError, setSendError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const bottom = useRef<HTMLDivElement>(null)
  const input = useRef<HTMLTextAreaElement>(null)
  const demo = useDemoProviders(agent.data)
  const scope = useMyScope(agent.data)
  const mayChat = scope === null || can(scope, 'run')
  // Which replies the demo model wrote: each turn's run says so in its usage.
  const [demoRuns, setDemoRuns] = useState<Record<string, boolean>>({})
  const replyRuns = (conversation?.messages ?? []).filter((m) => m.role === 'assistant' && m.run_id).map((m) => m.run_id!)
  useEffect(() => {
    const unknown = replyRuns.filter((id) => !(id in demoRuns))
    if (!unknown.length) return
    let cancelled = false
    Promise.all(unknown.map((id) => api.get<Run>(`/runs/${id}`).then((r) => [id, isDemoUsage(r.usage)] as const).catch(() => [id, false] as const)))
      .then((pairs) => !cancelled && setDemoRuns((d) => ({ ...d, ...Object.fromEntries(pairs) })))
    return () => {
      cancelled = true
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [replyRuns.join(',')])

  const loadConversation = useCallback(async (id: string) => {
    const c = await api.get<Conversation>(`/conversations/${id}`)
    setConversation(c)
    return c
  }, [])

  // Opening a conversation: load it, and follow its last turn if it is still going.
  useEffect(() => {
    if (!initialConversation) return
    let cancelled = false
    loadConversation(initialConversation)
      .then(async (c) => {
        const last = c.messages[c.messages.length - 1]
        if (last && last.role === 'user' && last.run_id) {
          const run = await api.get<Run>(`/runs/${last.run_id}`)
          if (!cancelled) setActiveRun(run.id)
        }
      })
      .catch((e) => !cancelled && setLoadError(e))
    return () => {
      cancelled = true
    }
  }, [initialConversation, loadConversation])

  const refreshTasks = useCallback(async (runId: string) => {
    try {
      const all = await api.get<{ data: Task[] }>('/tasks')
      setTasks(all.data.filter((t) => t.run_id === runId))
    } catch {
      // shown again on the next event
    }
  }, [])

  const onEvent = useCallback((e: RunEvent) => {
    if (e.type === 'node.waiting' || e.type === 'confirmation.received' || e.type === 'input.received') {
      if (activeRun) void refreshTasks(activeRun)
      session.refreshTasks()
    }
  }, [activeRun, refreshTasks, session])
  const live = useRunEvents(activeRun, onEvent)

  useEffect(() => {
    if (!activeRun) return
    setTurns((t) => ({ ...t, [activeRun]: live.events }))
    if (live.ended && conversationId) {
      const ran = activeRun
      setDemoRuns((d) => ({ ...d, [ran]: demoAnswered(live.events) }))
      setTasks([])
      setActiveRun(null)
      void loadConversation(conversationId).catch(setLoadError)
      session.refreshTasks()
      window.setTimeout(() => input.current?.focus(), 0)
    }
  }, [live.events, live.ended, activeRun, conversationId, loadConversation, session])

  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: 'end' })
  }, [live.events.length, conversation?.messages.length, tasks.length])

  const send = async (e: React.FormEvent) => {
    e.preventDefault()
    const content = draft.trim()
    if (!content || activeRun) return
    setBusy(true)
    setSendError(null)
    try {
      let id = conversationId
      if (!id) {
        const created = await api.post<Conversation>(`/agents/${agentId}/conversations`)
        id = created.id
        setConversationId(id)
        setConversation(created)
        window.history.replaceState(null, '', href(`/chat/${agentId}/${id}`))
      }
      const run = await api.post<Run>(`/conversations/${id}/messages`, { content })
      setDraft('')
      setActiveRun(run.id)
      await loadConversation(id)
    } catch (exc) {
      setSendError(errorText(exc))
    } finally {
      setBusy(false)
    }
  }

  const newConversation = () => {
    setConversationId(null)
    setConversation(null)
    setTurns({})
    setActiveRun(null)
    setTasks([])
    window.history.replaceState(null, '', href(`/chat/${agentId}`))
    input.current?.focus()
  }

  const activeBlocks = useMemo(() => (activeRun ? blocksOf(live.events) : []), [activeRun, live.events])
  const liveDemo = useMemo(() => demoAnswered(live.events), [live.events])
  if (agent.error) return <ErrorBox error={agent.error} />
  if (!agent.data) return <Loading what="the agent" />
  const a = agent.data
  const messages = conversation?.messages ?? []
  const declared = a.conversations ?? []

  return (
    <section aria-labelledby="page-title" className="chat-page">
      <PageHeader
        title={<span id="page-title">Chat with {a.alias || a.name}</span>}
        sub={conversationId ? <>Conversation <code>{conversationId}</code></> : 'A new conversation starts with your first message.'}
      >
        <button type="button" onClick={newConversation}>New conversation</button>
      </PageHeader>
      <ErrorBox error={loadError} />
      <DemoBanner providers={demo} what="Replies here come" testId="demo-banner" />
      {!mayChat && (
        <p className="notice" data-testid="scope-notice">You have the {scope} scope on this agent: you may read its conversations, not send it messages.</p>
      )}
      <div className="chat-layout">
        <div className="chat-main">
          <div className="chat-log" role="log" aria-label="Conversation" aria-live="polite" data-testid="chat-log">
            {messages.length === 0 && !activeRun && <p className="muted">Say something to {a.alias || a.name}.</p>}
            {messages.map((m) => {
              const turn = m.role === 'user' && m.run_id ? turns[m.run_id] : undefined
              const blocks = turn && m.run_id !== activeRun ? blocksOf(turn).filter((b) => b.kind !== 'text') : []
              return (
                <div key={m.seq}>
                  <div className={`bubble bubble-${m.role}`} data-testid="message" data-role={m.role}>
                    <span className="visually-hidden">{m.role === 'user' ? 'You' : a.alias || a.name}: </span>
                    {m.content}
                  </div>
                  {m.role === 'assistant' && m.run_id && demoRuns[m.run_id] && <DemoLabel providers={demo} />}
                  {blocks.map((b) => (b.kind === 'tool' ? <ToolBlock key={b.key} block={b} /> : <div key={b.key} className="error-box">{b.kind === 'error' ? b.text : ''}</div>))}
                  {m.role === 'user' && m.run_id && m.run_id !== activeRun && (
                    <a className="muted small steps-link" href={href(`/runs/${m.run_id}`)}>steps of this turn ({shortId(m.run_id)})</a>
                  )}
                </div>
              )
            })}
            {activeRun && (
              <div className="turn" data-testid="live-turn" aria-busy={!live.ended}>
                {activeBlocks.map((b) =>
                  b.kind === 'text' ? (
                    <div key={b.key}>
                      <div className="bubble bubble-assistant streaming" data-testid="streaming-reply">{b.text}</div>
                      {(demo.length > 0 || liveDemo) && <DemoLabel providers={demo} />}
                    </div>
                  ) : b.kind === 'tool' ? (
                    <ToolBlock key={b.key} block={b} />
                  ) : (
                    <div key={b.key} className="error-box" role="alert">{b.text}</div>
                  ),
                )}
                {tasks.map((t) => (
                  <TaskCard key={t.command_id} task={t} compact onDone={() => { setTasks((ts) => ts.filter((x) => x.command_id !== t.command_id)); session.refreshTasks() }} />
                ))}
                {!live.ended && <p className="muted small typing">{a.alias || a.name} is working… <a href={href(`/runs/${activeRun}`)}>run {shortId(activeRun)}</a></p>}
              </div>
            )}
            <div ref={bottom} />
          </div>
          <form className="chat-form" onSubmit={send}>
            <label htmlFor="chat-input" className="visually-hidden">Message</label>
            <textarea
              id="chat-input"
              ref={input}
              rows={2}
              value={draft}
              placeholder={!mayChat ? 'You may not send messages to this agent' : activeRun ? 'Wait for the reply…' : 'Message (Enter sends, Shift+Enter for a new line)'}
              disabled={!mayChat}
              onChange={(e) => setDraft(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && !e.shiftKey) {
                  e.preventDefault()
                  e.currentTarget.form?.requestSubmit()
                }
              }}
              data-testid="chat-input"
            />
            <button type="submit" className="primary" disabled={busy || Boolean(activeRun) || !draft.trim() || !mayChat} data-testid="chat-send">Send</button>
          </form>
          {sendError && <p className="field-error" role="alert">{sendError}</p>}
        </div>
        <aside className="chat-side" aria-labelledby="vars-title">
          <h2 id="vars-title">Conversation variables</h2>
          {conversation ? (
            <KeyValues values={conversation.variables} testId="chat-variables" empty="This agent keeps no variables." />
          ) : declared.length ? (
            <dl className="kv">
              {declared.map((v) => (
                <div key={v.name} className="kv-row"><dt>{v.name}</dt><dd className="muted">{v.description || v.type}</dd></div>
              ))}
            </dl>
          ) : (
            <p className="muted">This agent keeps no variables.</p>
          )}
          <h2>Agent</h2>
          <p><a href={href(`/agents/${a.id}`)}>{a.name}</a></p>
          <p className="muted small">{a.description}</p>
        </aside>
      </div>
    </section>
  )
}
