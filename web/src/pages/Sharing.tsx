import { api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { SharingPanel } from '../components/SharingPanel'
import { href } from '../router'
import type { Agent } from '../types'
import { useAsync } from '../util'

/** An agent's sharing, on a page of its own (the other kinds show the panel on theirs). */
export function SharingPage({ agentId }: { agentId: string }) {
  const agent = useAsync((s) => api.get<Agent>(`/agents/${agentId}`, s), [agentId])
  if (agent.error) return <ErrorBox error={agent.error} />
  if (!agent.data) return <Loading what="the agent" />
  const a = agent.data
  return (
    <section aria-labelledby="page-title">
      <PageHeader
        title={<span id="page-title">Sharing: {a.alias || a.name}</span>}
        sub={<><a href={href(`/agents/${a.id}`)}>Back to the agent</a> · your access: {a.my_share_scope ?? 'none'}</>}
      />
      <SharingPanel path={`/agents/${a.id}`} resource={a} noun="agent" onChanged={agent.reload} />
    </section>
  )
}
