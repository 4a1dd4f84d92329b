// The REST API under /api/v1 (docs/api.md), with the token from this browser session.

import type { Agent, ErrorItem } from './types'

const TOKEN_KEY = 'dhub.token'

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY)
}

export function setToken(token: string | null): void {
  if (token === null) sessionStorage.removeItem(TOKEN_KEY)
  else sessionStorage.setItem(TOKEN_KEY, token)
}

/** An error answer: the status, the server's sentence and its per-field problems. */
export class ApiError extends Error {
  status: number
  detail: string
  errors: ErrorItem[]

  constructor(status: number, detail: string, errors: ErrorItem[]) {
    super(detail)
    this.status = status
    this.detail = detail
    this.errors = errors
  }
}

type Listener = () => void
const unauthorizedListeners = new Set<Listener>()

/** Called when the server says the token is not (or no longer) valid. */
export function onUnauthorized(listener: Listener): () => void {
  unauthorizedListeners.add(listener)
  return () => unauthorizedListeners.delete(listener)
}

export const API = '/api/v1'

export interface RequestOptions {
  method?: string
  body?: unknown
  contentType?: string
  token?: string
  signal?: AbortSignal
  headers?: Record<string, string>
}

export function authHeaders(token?: string | null): Record<string, string> {
  const t = token ?? getToken()
  return t ? { Authorization: `Bearer ${t}` } : {}
}

export async function errorFrom(response: Response): Promise<ApiError> {
  let detail = `${response.status} ${response.statusText}`
  let errors: ErrorItem[] = []
  try {
    const body = await response.json()
    if (body && typeof body.detail === 'string') detail = body.detail
    if (body && Array.isArray(body.errors)) errors = body.errors
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, detail, errors)
}

export async function request<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders(options.token), ...options.headers }
  let body: BodyInit | undefined
  if (options.body !== undefined) {
    headers['Content-Type'] = options.contentType ?? 'application/json'
    body = JSON.stringify(options.body)
  }
  let response: Response
  try {
    response = await fetch(API + path, {
      method: options.method ?? 'GET',
      headers,
      body,
      signal: options.signal,
    })
  } catch (exc) {
    if (exc instanceof DOMException && exc.name === 'AbortError') throw exc
    throw new ApiError(0, `Could not reach the server: ${String(exc)}`, [])
  }
  if (!response.ok) {
    const error = await errorFrom(response)
    if (response.status === 401 && options.token === undefined) {
      unauthorizedListeners.forEach((l) => l())
    }
    throw error
  }
  if (response.status === 204) return undefined as T
  const text = await response.text()
  return (text ? JSON.parse(text) : undefined) as T
}

export const api = {
  get: <T>(path: string, signal?: AbortSignal) => request<T>(path, { signal }),
  post: <T>(path: string, body: unknown = {}) => request<T>(path, { method: 'POST', body }),
  patch: <T>(path: string, body: unknown) =>
    request<T>(path, { method: 'PATCH', body, contentType: 'application/merge-patch+json' }),
  del: (path: string) => request<void>(path, { method: 'DELETE' }),
}

/** POSTs a file as the request body itself (not a form): a table import, an ontology's
 * objects. The Content-Type says what it is (the server also takes ?format=). */
export async function upload<T>(path: string, file: Blob, contentType: string): Promise<T> {
  let response: Response
  try {
    response = await fetch(API + path, {
      method: 'POST',
      headers: { ...authHeaders(), 'Content-Type': contentType },
      body: file,
    })
  } catch (exc) {
    throw new ApiError(0, `Could not reach the server: ${String(exc)}`, [])
  }
  if (!response.ok) throw await errorFrom(response)
  return (await response.json()) as T
}

/** Download what an authenticated GET answers (an attachment: a run artifact) as a file named
 * `name`: fetched with the session's token, handed to the browser as a blob. */
export async function downloadFile(path: string, name: string): Promise<void> {
  await download(path, { headers: authHeaders() }, name)
}

/** The same for what an authenticated POST of JSON `body` answers (a template rendered as a
 * PDF): a plain link cannot POST nor carry the token, so it is fetched and saved as a blob. */
export async function downloadPost(path: string, body: unknown, name: string): Promise<void> {
  const headers = { ...authHeaders(), 'Content-Type': 'application/json' }
  await download(path, { method: 'POST', headers, body: JSON.stringify(body) }, name)
}

async function download(path: string, init: RequestInit, name: string): Promise<void> {
  let response: Response
  try {
    response = await fetch(API + path, init)
  } catch (exc) {
    throw new ApiError(0, `Could not reach the server: ${String(exc)}`, [])
  }
  if (!response.ok) throw await errorFrom(response)
  const disposition = response.headers.get('Content-Disposition') ?? ''
  const named = /filename="([^"]+)"/.exec(disposition)
  saveBlob(await response.blob(), named ? named[1] : name)
}

/** Hands `blob` to the browser as a download named `name`. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob)
  const link = document.createElement('a')
  link.href = url
  link.download = name
  document.body.appendChild(link)
  link.click()
  link.remove()
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v))
  }
  const s = q.toString()
  return s ? `?${s}` : ''
}

// -- agents: documents and "apply" (create, or make the agent with that name equal) --------

export const SERVER_OWNED = [
  'id', 'created_at', 'updated_at', 'owners', 'my_share_scope', 'is_builtin', 'item', 'version',
  'effective_markings', // its own and its folders' markings: the server works them out
]
const READ_ONLY = new Set([...SERVER_OWNED, 'markings'])

type Json = unknown
type JsonObject = Record<string, Json>

function isObject(v: Json): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** The agent's document as one writes it: without the envelope fields the server owns. */
export function documentOf(agent: Agent): JsonObject {
  const out: JsonObject = {}
  for (const [k, v] of Object.entries(agent)) if (!READ_ONLY.has(k)) out[k] = v
  return out
}

/** A merge patch turning `stored` into `doc`: fields `doc` lacks are nulled, at every depth
 * (merge patches merge nested objects); the server-owned fields are left alone. */
export function replacementPatch(stored: JsonObject, doc: JsonObject): JsonObject {
  const patch: JsonObject = {}
  for (const k of Object.keys(stored)) if (!(k in doc) && !READ_ONLY.has(k)) patch[k] = null
  return { ...patch, ...replace(stored, doc) }
}

function replace(stored: JsonObject, doc: JsonObject): JsonObject {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(doc)) {
    const old = stored[key]
    if (isObject(old) && isObject(value)) {
      const nested: JsonObject = {}
      for (const k of Object.keys(old)) if (!(k in value)) nested[k] = null
      out[key] = { ...nested, ...replace(old, value) }
    } else {
      out[key] = value
    }
  }
  return out
}

export async function findAgentByName(name: string, folderId: string | null): Promise<Agent | null> {
  let cursor: string | null = null
  do {
    const page: { data: Agent[]; next_cursor: string | null } = await api.get(
      // Built-ins sit in no folder and hold no folder's names (docs/api.md#built-in-agents).
      `/agents${query({ q: name, is_builtin: 'false', limit: 200, cursor })}`,
    )
    for (const a of page.data) {
      if (a.name === name && (a.folder_id ?? null) === (folderId ?? null)) return a
    }
    cursor = page.next_cursor
  } while (cursor)
  return null
}

export type ApplyOutcome = 'created' | 'updated' | 'unchanged'

/** Create the agent, or make the existing one of that name in the same place (its folder, else
 * the top of its collection, else the caller's home folder) equal to `doc`. */
export async function applyAgent(doc: JsonObject): Promise<{ outcome: ApplyOutcome; agent: Agent }> {
  const name = doc.name
  const folder = doc.folder_id
  const body: JsonObject = {}
  for (const [k, v] of Object.entries(doc)) if (!SERVER_OWNED.includes(k)) body[k] = v
  let existing: Agent | null = null
  if (typeof name === 'string' && (folder == null || typeof folder === 'string')) {
    // Without a folder_id (or collection_id) an agent goes to the caller's home folder: look there.
    const place = folder ?? (doc.collection_id == null ? (await api.get<{ id: string }>('/folders/home')).id : null)
    existing = await findAgentByName(name, (place as string | null) ?? null)
  }
  if (existing === null) {
    return { outcome: 'created', agent: await api.post<Agent>('/agents', body) }
  }
  if (Array.isArray(body.markings) && sameSet(body.markings as string[], existing.markings)) {
    delete body.markings
  }
  const updated = await api.patch<Agent>(
    `/agents/${existing.id}`,
    replacementPatch(existing as unknown as JsonObject, body),
  )
  return { outcome: updated.version !== existing.version ? 'updated' : 'unchanged', agent: updated }
}

function sameSet(a: string[], b: string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n')
}
