// Shapes of the API's answers (src/dhub/api/routers/*.py, docs/api.md, docs/runs.md).

export interface ErrorItem {
  loc: string
  message: string
  code: string
}

export interface Principal {
  id: string
  type: 'user' | 'group' | 'public'
  display_name: string
  avatar_url?: string | null
  email?: string | null
}

export interface StartVariable {
  name: string
  type: 'string' | 'number' | 'boolean' | 'object' | 'array'
  required?: boolean
  default?: unknown
  description?: string
}

export interface WorkflowNode {
  id: string
  type: string
  config: Record<string, unknown>
  metadata?: Record<string, unknown>
}

export interface WorkflowEdge {
  source: string
  target: string
  condition?: string | null
}

export interface ConversationVariable {
  name: string
  type: string
  description?: string
  default?: unknown
}

export interface Agent {
  id: string
  name: string
  alias: string | null
  category: string
  type: string | null
  collection_id: string | null
  folder_id: string | null
  tags: string[] | null
  description: string
  markings: string[]
  /** Its own markings and those of the folders and collection it is in. */
  effective_markings?: string[]
  created_at: number
  updated_at: number
  owners: Principal[]
  my_share_scope: 'owner' | 'grant' | 'admin' | null
  input_mode: 'chat' | 'event'
  mode: 'react' | 'workflow'
  agent: Record<string, unknown> | null
  nodes: WorkflowNode[]
  edges: WorkflowEdge[]
  conversations: ConversationVariable[]
  version: number
  is_builtin: boolean
  [key: string]: unknown
}

/** A folder, a collection, or anything in one as a children listing shows it (its envelope;
 * `category` says its kind). */
export interface Placed {
  id: string
  name: string
  alias: string | null
  category: string
  type: string | null
  collection_id: string | null
  folder_id: string | null
  description: string
  markings: string[]
  effective_markings: string[]
  my_share_scope: 'owner' | 'grant' | 'admin' | null
  version: number
}

export interface Page<T> {
  data: T[]
  next_cursor: string | null
}

export interface AgentVersion {
  version: number
  created_at: number
  created_by: string
}

export interface Grant {
  principal_id: string
  type: string
  display_name: string
  scope: 'viewer' | 'runner' | 'editor'
}

export type RunStatus = 'queued' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled'

/** A document a run made (GET /runs/{id}/artifacts): a template node's or a render tool's. */
export interface Artifact {
  id: string
  run_id: string
  name: string
  media_type: string
  format: string | null
  size: number
  node_id: string | null
  template_id: string | null
  template_version: number | null
  created_at: number
  created_by: string
}

/** GET /usage: tokens and cost summed over runs (docs/observability.md). */
export interface UsageTotals {
  runs: number
  calls: number
  total_tokens?: number
  cost_usd: number | null
  cost_note?: string
  by_model: Record<string, Record<string, unknown>>
}

export interface Run {
  id: string
  agent_id: string
  agent_version: number
  user_id: string
  status: RunStatus
  waiting: Record<string, unknown> | null
  inputs: Record<string, unknown>
  outputs: Record<string, unknown> | null
  error: Record<string, unknown> | null
  usage: Record<string, unknown>
  created_at: number
  started_at: number | null
  finished_at: number | null
  updated_at: number
}

export interface RunEvent {
  seq: number
  type: string
  node_id: string | null
  data: Record<string, unknown>
  created_at: number
}

export interface InputField {
  name: string
  type: string
  description?: string
  required?: boolean
  options?: unknown[]
  default?: unknown
}

export interface Task {
  run_id: string
  command_id: string
  kind: 'await_input' | 'await_confirmation'
  node_id: string
  frame: string
  request: {
    prompt?: string
    fields?: InputField[]
    actor?: string
    arguments?: Record<string, unknown>
    [key: string]: unknown
  }
  assignees: string[]
  created_at: number
  due_at: number | null
}

export interface Message {
  seq: number
  role: string
  content: string
  run_id: string | null
  created_at: number
}

export interface Conversation {
  id: string
  agent_id: string
  user_id: string
  variables: Record<string, unknown>
  messages: Message[]
  created_at: number
  updated_at: number
}

/** A conversation as GET /api/v1/conversations lists it (no messages). */
export interface ConversationSummary {
  id: string
  agent_id: string
  user_id: string
  variables: Record<string, unknown>
  message_count: number
  turn_run_id: string | null
  created_at: number
  updated_at: number
}

export interface Me {
  id: string
  display_name: string
  email: string | null
  is_admin: boolean
  groups: string[]
  markings: string[]
}

export interface Example {
  file: string
  name: string
  description: string
  mode: string
  document: Record<string, unknown>
}

export interface Marking {
  id: string
  name: string
  description: string | null
}
