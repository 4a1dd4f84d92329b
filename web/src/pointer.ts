// JSON pointers (RFC 6901) of the server's 422 answers, mapped onto the text being edited:
// the line of the pointed-at field's key (or array item), so an error is shown beside it.

import { parseDocument, isMap, isSeq, isScalar, YAMLParseError } from 'yaml'
import type { Node as YamlNode } from 'yaml'
import { ApiError } from './api'

export function splitPointer(pointer: string): string[] {
  if (pointer === '' || pointer === '/') return []
  return pointer
    .replace(/^\//, '')
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
}

export function lineOfOffset(text: string, offset: number): number {
  let line = 1
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++
  return line
}

export function offsetOfLine(text: string, line: number): number {
  let offset = 0
  for (let l = 1; l < line; l++) {
    const next = text.indexOf('\n', offset)
    if (next < 0) return text.length
    offset = next + 1
  }
  return offset
}

export interface Location {
  line: number
  /** false when the pointer goes past what the text has (a missing field): the line is its
   * nearest existing parent's. */
  exact: boolean
}

/** The line of `pointer` in `text` (JSON or YAML: JSON is read as YAML's flow style). */
export function locate(text: string, pointer: string): Location | null {
  let doc
  try {
    doc = parseDocument(text, { keepSourceTokens: false, uniqueKeys: false })
  } catch {
    return null
  }
  let node = doc.contents as YamlNode | null
  if (!node || !node.range) return { line: 1, exact: pointer === '' }
  let offset = node.range[0]
  for (const segment of splitPointer(pointer)) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === segment)
      if (!pair) return { line: lineOfOffset(text, offset), exact: false }
      const key = pair.key as YamlNode
      if (key.range) offset = key.range[0]
      node = pair.value as YamlNode | null
      if (!node) return { line: lineOfOffset(text, offset), exact: segment === splitPointer(pointer).at(-1) }
    } else if (isSeq(node)) {
      const index = /^\d+$/.test(segment) ? Number(segment) : -1
      const item = node.items[index] as YamlNode | undefined
      if (!item || !item.range) return { line: lineOfOffset(text, offset), exact: false }
      offset = item.range[0]
      node = item
    } else {
      return { line: lineOfOffset(text, offset), exact: false }
    }
  }
  return { line: lineOfOffset(text, offset), exact: true }
}

export interface ParseResult {
  value?: unknown
  error?: { message: string; line: number | null }
}

/** Parses the editor's text as JSON or YAML; a syntax error comes with its line. */
export function parseText(text: string, format: 'json' | 'yaml'): ParseResult {
  if (format === 'json') {
    try {
      return { value: JSON.parse(text) }
    } catch (exc) {
      const message = exc instanceof Error ? exc.message : String(exc)
      const lineCol = /line (\d+) column/.exec(message)
      const position = /position (\d+)/.exec(message)
      const line = lineCol ? Number(lineCol[1]) : position ? lineOfOffset(text, Number(position[1])) : null
      return { error: { message: `Not valid JSON: ${message}`, line } }
    }
  }
  const doc = parseDocument(text, { prettyErrors: true })
  if (doc.errors.length) {
    const first = doc.errors[0] as YAMLParseError
    return {
      error: {
        message: `Not valid YAML: ${first.message.split('\n')[0]}`,
        line: first.linePos ? first.linePos[0].line : lineOfOffset(text, first.pos[0]),
      },
    }
  }
  return { value: doc.toJS() }
}

/** The server's pointed errors (`loc`) put beside the form's fields: `place` names the field
 * of a pointer's parts (or null). What no field takes, or an error that is not the API's
 * (a network failure), comes back as `rest` for an ErrorBox. */
export function placeErrors(exc: unknown, place: (parts: string[]) => string | null): { byField: Record<string, string>; rest: unknown } {
  const byField: Record<string, string> = {}
  if (!(exc instanceof ApiError) || exc.errors.length === 0) return { byField, rest: exc }
  let unplaced = false
  for (const item of exc.errors) {
    const field = place(splitPointer(item.loc))
    if (field === null) unplaced = true
    else byField[field] = byField[field] ? `${byField[field]} ${item.message}` : item.message
  }
  return { byField, rest: unplaced ? exc : null }
}
