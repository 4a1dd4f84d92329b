// Folders and collections (docs/folders.md): what is in one, every folder the caller can see.

import { api, query } from './api'
import type { Page, Placed } from './types'

/** Every item of a paginated listing at `path` (which takes limit and cursor). */
export async function everything(path: string, signal?: AbortSignal): Promise<Placed[]> {
  const out: Placed[] = []
  let cursor: string | null = null
  do {
    const sep = path.includes('?') ? '&' : '?'
    const page: Page<Placed> = await api.get(`${path}${sep}${query({ limit: 200, cursor }).slice(1)}`, signal)
    out.push(...page.data)
    cursor = page.next_cursor
  } while (cursor)
  return out
}

/** What is directly in a folder or at a collection's top level, folders first. */
export async function childrenOf(container: Placed, signal?: AbortSignal): Promise<Placed[]> {
  const items = await everything(`/${container.category}s/${encodeURIComponent(container.id)}/children`, signal)
  return [...items.filter((i) => i.category === 'folder'), ...items.filter((i) => i.category !== 'folder')]
}

/** How a folder is called in a list: a home folder by its alias ("Ada's home"). */
export function folderLabel(folder: Placed): string {
  return folder.type === 'home' ? folder.alias || 'home' : folder.name
}

/** The console's page of an item, when it has one (agents do). */
export function pageOf(item: Placed): string | null {
  if (item.category === 'agent') return `/agents/${item.id}`
  if (item.category === 'folder' || item.category === 'collection') return `/folders/${item.id}`
  if (item.category === 'table') return `/tables/${item.id}`
  if (item.category === 'ontology') return `/ontologies/${item.id}`
  if (item.category === 'template') return `/templates/${item.id}`
  if (item.category === 'mcp_server') return `/mcp-servers/${item.id}`
  return null
}
