// MCP servers (docs/mcp.md "Using MCP servers' tools"): their shapes, how a secret reference
// is shown, and the item an agent's `tools` lists to get a server's tools.

import { ApiError } from './api'
import type { Placed } from './types'

/** `{"secret": "secret.…"}`: a stored secret by reference. The API never returns its value. */
export interface SecretRef { secret: string }
export type McpValue = string | SecretRef

export interface McpServer extends Placed {
  transport: 'streamable_http' | 'stdio'
  url?: string | null
  headers?: Record<string, McpValue>
  command?: string | null
  args?: string[]
  env?: Record<string, McpValue>
  source?: string | null
  dependencies?: string[]
  network?: boolean
  allowed_tools?: string[] | null
  timeout?: number
}

export interface McpTool {
  name: string
  title: string | null
  description: string
  input_schema: { properties?: Record<string, unknown>; required?: string[] } & Record<string, unknown>
  output_schema: Record<string, unknown> | null
  annotations: Record<string, unknown> | null
}

export interface McpTools {
  data: McpTool[]
  server: { id: string; name: string; version: number }
}

export const mcpPath = (id: string) => `/mcp-servers/${encodeURIComponent(id)}`

export function isSecret(value: unknown): value is SecretRef {
  return typeof value === 'object' && value !== null && typeof (value as SecretRef).secret === 'string'
}

/** How dhub reaches a server: its URL, or the program it starts. */
export function whereOf(server: McpServer): string {
  if (server.transport === 'streamable_http') return server.url ?? ''
  if (server.command) return [server.command, ...(server.args ?? [])].join(' ')
  return '(its own source)'
}

/** `city, days?`: a tool's parameters, the optional ones marked. */
export function parametersOf(tool: McpTool): string {
  const required = new Set(tool.input_schema.required ?? [])
  return Object.keys(tool.input_schema.properties ?? {}).map((n) => (required.has(n) ? n : `${n}?`)).join(', ')
}

/** What an agent's `tools` lists for a server: its id alone (every tool it allows), else
 * `{id, tools, prefix}` with only what is set. `chosen` null: all its tools. */
export function toolsItem(serverId: string, chosen: string[] | null, prefix: string): string | Record<string, unknown> {
  const p = prefix.trim()
  if (chosen === null && !p) return serverId
  return { id: serverId, ...(chosen !== null ? { tools: chosen } : {}), ...(p ? { prefix: p } : {}) }
}

function itemId(item: unknown): unknown {
  return typeof item === 'object' && item !== null ? (item as { id?: unknown }).id : item
}

/** `doc` with `item` in its `agent.tools`, in place of what listed the same server before.
 * Throws, saying why, when `doc` is not a react agent (whose tools these are). */
export function withToolsItem(doc: Record<string, unknown>, item: string | Record<string, unknown>): Record<string, unknown> {
  if (doc.mode !== 'react') {
    throw new Error("MCP tools go in a react agent's agent.tools: this document is not a react agent (mode: react). A workflow calls one with a tool_call node.")
  }
  const agent = doc.agent
  if (agent !== undefined && agent !== null && (typeof agent !== 'object' || Array.isArray(agent))) {
    throw new Error("The document's 'agent' must be an object to add tools to it.")
  }
  const current = ((agent as Record<string, unknown> | null | undefined) ?? {}).tools
  if (current !== undefined && current !== null && !Array.isArray(current)) {
    throw new Error("The document's agent.tools must be a list to add tools to it.")
  }
  const id = itemId(item)
  const kept = ((current as unknown[] | null | undefined) ?? []).filter((t) => itemId(t) !== id)
  return { ...doc, agent: { ...((agent as Record<string, unknown>) ?? {}), tools: [...kept, item] } }
}

/** Why a server's tools cannot be listed. A 404 for a server the caller can read means it may
 * not run it (the API says no more, as for any id): say what would let it. */
export function toolsError(error: unknown): unknown {
  if (error instanceof ApiError && error.status === 404) {
    return new Error('Listing its tools needs run access to this server (they run on your behalf): ask one of its owners for a runner grant.')
  }
  return error
}
