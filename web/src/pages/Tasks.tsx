import { useState } from 'react'
import { api } from '../api'
import { ErrorBox, Loading, PageHeader } from '../components/bits'
import { TaskCard } from '../components/TaskCard'
import { useSession } from '../session'
import type { Task } from '../types'
import { href } from '../router'
import { useAsync, useInterval } from '../util'
import { useAgentNames } from './Runs'

export function TasksPage() {
  const session = useSession()
  const tasks = useAsync((s) => api.get<{ data: Task[] }>('/tasks', s), [])
  const agents = useAgentNames()
  const [message, setMessage] = useState<{ text: string; runId: string } | null>(null)
  useInterval(tasks.reload, 4000)
  const names = new Map((agents.data ?? []).map((a) => [a.id, a.alias || a.name]))
  // the run's agent is not in a task: look it up from the run once
  const runs = useAsync(async (s) => {
    const ids = [...new Set((tasks.data?.data ?? []).map((t) => t.run_id))]
    const pairs = await Promise.all(ids.map(async (id) => [id, (await api.get<{ agent_id: string }>(`/runs/${id}`, s)).agent_id] as const))
    return new Map(pairs)
  }, [(tasks.data?.data ?? []).map((t) => t.run_id).join(',')])

  return (
    <section aria-labelledby="page-title">
      <PageHeader title={<span id="page-title">Tasks</span>} sub="Forms and confirmations waiting for you." />
      <div aria-live="polite">
        {message && (
          <p className="success" role="status" data-testid="task-message">
            {message.text} <a href={href(`/runs/${message.runId}`)}>Follow its run</a>
          </p>
        )}
      </div>
      <ErrorBox error={tasks.error} />
      {!tasks.data ? (
        <Loading what="tasks" />
      ) : tasks.data.data.length === 0 ? (
        <p className="muted" data-testid="no-tasks">Nothing waits for you.</p>
      ) : (
        <div className="task-list">
          {tasks.data.data.map((t) => (
            <TaskCard
              key={`${t.run_id}/${t.command_id}`}
              task={t}
              agentName={names.get(runs.data?.get(t.run_id) ?? '')}
              onDone={(m, t) => {
                setMessage({ text: m, runId: t.run_id })
                tasks.reload()
                session.refreshTasks()
              }}
            />
          ))}
        </div>
      )}
    </section>
  )
}
