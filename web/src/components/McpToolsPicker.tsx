// The agent editor's picker for an MCP server's tools (docs/mcp.md "Giving an agent its
// tools"): a server the caller may see, then all its tools or the ones checked (listed live
// from GET /mcp-servers/{id}/tools), and an optional prefix. It hands the editor the item to
// put in the agent's `tools`; the editor puts it in the document.

import { useState } from 'react'
import { api } from '../api'
import { everything } from '../folders'
import { mcpPath, parametersOf, toolsError, toolsItem } from '../mcp'
import type { McpServer, McpTools } from '../mcp'
import { useAsync } from '../util'
import { ErrorBox, Loading } from './bits'

type Item = string | Record<string, unknown>

export function McpToolsPicker({ onAdd }: { onAdd: (item: Item, what: string) => void }) {
  const [open, setOpen] = useState(false)
  return (
    <details className="card mcp-picker" data-testid="mcp-picker" onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>Add an MCP server's tools</summary>
      {open && <Picker onAdd={onAdd} />}
    </details>
  )
}

function Picker({ onAdd }: { onAdd: (item: Item, what: string) => void }) {
  const servers = useAsync((s) => everything('/mcp-servers', s) as Promise<McpServer[]>, [])
  const [serverId, setServerId] = useState('')
  const [all, setAll] = useState(true)
  const [chosen, setChosen] = useState<string[]>([])
  const [prefix, setPrefix] = useState('')
  const tools = useAsync(
    (s) => (serverId ? api.get<McpTools>(`${mcpPath(serverId)}/tools`, s) : Promise.resolve(null)),
    [serverId],
  )

  const pick = (id: string) => {
    setServerId(id)
    setAll(true)
    setChosen([])
  }
  const toggle = (name: string, on: boolean) => {
    setAll(false)
    setChosen((c) => (on ? [...c.filter((n) => n !== name), name] : c.filter((n) => n !== name)))
  }
  const server = servers.data?.find((s) => s.id === serverId)
  const offered = tools.data?.data ?? []
  // Kept in the server's order, whatever order they were checked in.
  const ordered = offered.map((t) => t.name).filter((n) => chosen.includes(n))
  const ready = Boolean(server) && (all || ordered.length > 0)
  const add = () => {
    if (!server || !ready) return
    onAdd(toolsItem(server.id, all ? null : ordered, prefix),
      all ? `every tool of ${server.name}` : `${ordered.join(', ')} from ${server.name}`)
  }

  if (servers.error) return <ErrorBox error={servers.error} title="The MCP servers cannot be listed" />
  if (!servers.data) return <Loading what="MCP servers" />
  if (!servers.data.length) {
    return <p className="muted">No MCP servers that you can see. <a href="#/mcp-servers/new">Add one</a> first.</p>
  }
  return (
    <div className="mcp-picker-body">
      <div className="field">
        <label htmlFor="mcp-pick-server">MCP server</label>
        <select id="mcp-pick-server" value={serverId} onChange={(e) => pick(e.target.value)}>
          <option value="">Choose one…</option>
          {servers.data.map((s) => <option key={s.id} value={s.id}>{s.alias || s.name}</option>)}
        </select>
      </div>
      {serverId && (
        <>
          <ErrorBox error={toolsError(tools.error)} title="Its tools cannot be listed" />
          {tools.loading && !tools.data ? (
            <Loading what="its tools" />
          ) : tools.data && !tools.error && (
            <fieldset className="field" data-testid="mcp-pick-tools">
              <legend>Tools</legend>
              <label className="choice">
                <input type="radio" name="mcp-pick-which" checked={all} onChange={() => setAll(true)} />
                <span>All its tools <span className="muted small">(as the server lists them, now and later)</span></span>
              </label>
              <label className="choice">
                <input type="radio" name="mcp-pick-which" checked={!all} onChange={() => setAll(false)} /> <span>Only the ones checked</span>
              </label>
              <ul className="plain mcp-tool-list">
                {offered.map((t) => (
                  <li key={t.name} data-testid="mcp-pick-tool" data-name={t.name}>
                    <label className="choice">
                      <input type="checkbox" checked={!all && chosen.includes(t.name)} onChange={(e) => toggle(t.name, e.target.checked)} />
                      <span><code>{t.name}</code>{parametersOf(t) && <span className="muted small"> ({parametersOf(t)})</span>}
                        {t.description && <span className="muted small"> {t.description}</span>}</span>
                    </label>
                  </li>
                ))}
              </ul>
            </fieldset>
          )}
          <div className="row wrap">
            <div className="field">
              <label htmlFor="mcp-pick-prefix">Prefix <span className="muted small">(optional)</span></label>
              <input id="mcp-pick-prefix" value={prefix} maxLength={32} onChange={(e) => setPrefix(e.target.value)} placeholder="gh_" />
              <p className="hint">Put before each tool's name for the model: two servers' tools of one name need one.</p>
            </div>
            <div className="field field-buttons">
              <button type="button" onClick={add} disabled={!ready}>Add to the agent's tools</button>
            </div>
          </div>
        </>
      )}
    </div>
  )
}
