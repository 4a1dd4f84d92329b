import { useCallback, useEffect, useMemo, useRef, useState } from 'react'
import { api, getToken, onUnauthorized, setToken } from './api'
import { href, useRoute } from './router'
import type { Route } from './router'
import { SessionContext } from './session'
import type { Me, Task } from './types'
import { useInterval } from './util'
import { SignIn } from './pages/SignIn'
import { AgentsPage } from './pages/Agents'
import { AgentDetailPage } from './pages/AgentDetail'
import { AgentEditorPage } from './pages/AgentEditor'
import { ExamplesPage } from './pages/Examples'
import { RunsPage } from './pages/Runs'
import { RunDetailPage } from './pages/RunDetail'
import { StartRunPage } from './pages/StartRun'
import { TasksPage } from './pages/Tasks'
import { ChatPage } from './pages/Chat'
import { SharingPage } from './pages/Sharing'
import { FoldersPage } from './pages/Folders'
import { TablesPage } from './pages/Tables'
import { OntologiesPage } from './pages/Ontologies'
import { TemplatesPage } from './pages/Templates'
import { McpServersPage } from './pages/McpServers'

const NAV = [
  { path: '/agents', label: 'Agents' },
  { path: '/folders', label: 'Folders' },
  { path: '/tables', label: 'Tables' },
  { path: '/ontologies', label: 'Ontologies' },
  { path: '/templates', label: 'Templates' },
  { path: '/mcp-servers', label: 'MCP servers' },
  { path: '/examples', label: 'Examples' },
  { path: '/runs', label: 'Runs' },
  { path: '/tasks', label: 'Tasks' },
  { path: '/chat', label: 'Chat' },
]

function page(route: Route) {
  const [section, id, sub] = route.parts
  switch (section) {
    case 'agents':
      if (id === 'new') return <AgentEditorPage key={`new-${route.params.get('example') ?? ''}`} agentId={null} route={route} />
      if (id && sub === 'edit') return <AgentEditorPage key={`edit-${id}-${route.params.get('version') ?? ''}`} agentId={id} route={route} />
      if (id && sub === 'run') return <StartRunPage key={id} agentId={id} />
      if (id && sub === 'sharing') return <SharingPage key={id} agentId={id} />
      if (id) return <AgentDetailPage key={id} agentId={id} route={route} />
      return <AgentsPage route={route} />
    case 'folders':
      return <FoldersPage selectedId={id ?? null} />
    case 'tables':
      return <TablesPage key={id ?? ''} tableId={id ?? null} />
    case 'ontologies':
      return <OntologiesPage key={`${id ?? ''}/${sub ?? ''}`} ontologyId={id ?? null} sub={sub ?? null} />
    case 'templates':
      return <TemplatesPage key={`${id ?? ''}/${sub ?? ''}`} templateId={id ?? null} sub={sub ?? null} />
    case 'mcp-servers':
      return <McpServersPage serverId={id ?? null} />
    case 'examples':
      return <ExamplesPage />
    case 'runs':
      if (id) return <RunDetailPage key={id} runId={id} />
      return <RunsPage route={route} />
    case 'tasks':
      return <TasksPage />
    case 'chat':
      return <ChatPage key={id ?? ''} agentId={id ?? null} conversationId={sub ?? null} />
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>No page at <code>{route.path}</code>. <a href="#/agents">Go to the agents</a>.</p>
        </section>
      )
  }
}

export function App() {
  const route = useRoute()
  const [me, setMe] = useState<Me | null>(null)
  const [checking, setChecking] = useState(() => getToken() !== null)
  const [notice, setNotice] = useState<string | null>(null)
  const [taskCount, setTaskCount] = useState(0)
  const main = useRef<HTMLElement>(null)

  const signOut = useCallback((why?: string) => {
    setToken(null)
    setMe(null)
    setNotice(why ?? null)
  }, [])

  useEffect(() => onUnauthorized(() => signOut('The server no longer accepts that token: sign in again.')), [signOut])

  useEffect(() => {
    if (!getToken()) return
    api
      .get<Me>('/me')
      .then(setMe)
      .catch(() => setToken(null))
      .finally(() => setChecking(false))
  }, [])

  const refreshTasks = useCallback(() => {
    if (!getToken()) return
    api.get<{ data: Task[] }>('/tasks').then((t) => setTaskCount(t.data.length)).catch(() => {})
  }, [])
  useEffect(() => {
    if (me) refreshTasks()
  }, [me, refreshTasks])
  useInterval(refreshTasks, me ? 5000 : null)

  // Move focus to the page on navigation, so keyboard and screen reader users start there.
  const first = useRef(true)
  useEffect(() => {
    if (first.current) {
      first.current = false
      return
    }
    main.current?.focus({ preventScroll: false })
  }, [route.path])

  const session = useMemo(
    () => (me ? { me, signOut: () => signOut(), taskCount, refreshTasks } : null),
    [me, signOut, taskCount, refreshTasks],
  )

  if (checking) return <p className="loading-page">Loading…</p>
  if (!me || !session) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(token, who) => {
          setToken(token)
          setNotice(null)
          setMe(who)
        }}
      />
    )
  }
  const section = `/${route.parts[0] ?? 'agents'}`
  return (
    <SessionContext.Provider value={session}>
      <a className="skip-link" href="#main" onClick={(e) => { e.preventDefault(); main.current?.focus() }}>
        Skip to content
      </a>
      <header className="top">
        <a className="brand" href="#/agents">dhub</a>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.path}>
                <a href={href(n.path)} aria-current={section === n.path ? 'page' : undefined}>
                  {n.label}
                  {n.path === '/tasks' && taskCount > 0 && (
                    <span className="badge" data-testid="task-count" aria-label={`${taskCount} pending`}>{taskCount}</span>
                  )}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div className="who">
          <span title={me.id} data-testid="signed-in-as">{me.display_name}</span>
          <button type="button" className="link-button" onClick={() => signOut()}>Sign out</button>
        </div>
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        {page(route)}
      </main>
    </SessionContext.Provider>
  )
}
