// The demo model (docs/providers.md): what answers, labelled, for a model provider the server
// has no configuration for. GET /api/v1/providers/{name} says whether it answers for a name;
// a call it answered carries "model": "demo" in its usage (events and the run's usage).

import { api } from './api'
import type { Agent, RunEvent } from './types'
import { useAsync } from './util'

export interface ResolvedProvider {
  name: string
  configured: boolean
  type: string | null
  demo: boolean
  configure: string | null
}

/** The model providers the agent's model calls go to: a react agent's (and its roles'),
 * a workflow's llm nodes'. */
export function providersOf(agent: Pick<Agent, 'mode' | 'agent' | 'nodes'>): string[] {
  const found = new Set<string>()
  const config = agent.agent as { model_provider?: string; roles?: unknown[] } | null
  if (agent.mode === 'react' && config?.model_provider) found.add(config.model_provider)
  for (const role of config?.roles ?? []) {
    const p = (role as { model_provider?: unknown } | null)?.model_provider
    if (typeof p === 'string' && p) found.add(p)
  }
  for (const n of agent.nodes ?? []) {
    const p = n.type === 'llm' ? n.config.model_provider : undefined
    if (typeof p === 'string' && p) found.add(p)
  }
  return [...found].sort()
}

/** The agent's providers the demo model answers for (empty when none, or still loading). */
export function useDemoProviders(agent: Pick<Agent, 'mode' | 'agent' | 'nodes'> | undefined): ResolvedProvider[] {
  const names = agent ? providersOf(agent) : []
  const resolved = useAsync(
    (s) => Promise.all(names.map((n) => api.get<ResolvedProvider>(`/providers/${encodeURIComponent(n)}`, s))),
    [names.join(',')],
  )
  return (resolved.data ?? []).filter((p) => p.demo)
}

export function isDemoUsage(usage: unknown): boolean {
  return typeof usage === 'object' && usage !== null && (usage as { model?: unknown }).model === 'demo'
}

/** Whether any model call among the events was answered by the demo model. */
export function demoAnswered(events: RunEvent[]): boolean {
  return events.some((e) => isDemoUsage(e.data.usage))
}

/** How to get real answers, as a sentence: "set DHUB_OPENAI_API_KEY on the server and restart it". */
export function howToConfigure(providers: ResolvedProvider[]): string {
  const ways = [...new Set(providers.map((p) => p.configure).filter(Boolean))]
  if (!ways.length) return 'configure a model provider on the server (docs/providers.md)'
  return `${ways.join(', and ')} on the server and restart it`
}
