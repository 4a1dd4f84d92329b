import { forwardRef, useImperativeHandle, useRef } from 'react'
import { offsetOfLine } from '../pointer'

export interface Mark {
  line: number
  message: string
}

export interface CodeEditorHandle {
  /** Puts the caret on `line`, selects it and scrolls it into view. */
  goToLine: (line: number) => void
  /** Scrolls `line` into view, leaving the focus where it is. */
  showLine: (line: number) => void
}

interface Props {
  id: string
  value: string
  onChange: (value: string) => void
  marks: Mark[]
  label: string
  describedBy?: string
}

const LINE_HEIGHT = 20

/** A plain textarea with line numbers; lines with errors are highlighted in the gutter and
 * behind the text. Lines do not wrap, so a line number is a line of text. */
export const CodeEditor = forwardRef<CodeEditorHandle, Props>(function CodeEditor(
  { id, value, onChange, marks, label, describedBy },
  ref,
) {
  const area = useRef<HTMLTextAreaElement>(null)
  const scroller = useRef<HTMLDivElement>(null)
  const lines = value.split('\n').length
  const byLine = new Map<number, string[]>()
  for (const m of marks) byLine.set(m.line, [...(byLine.get(m.line) ?? []), m.message])

  useImperativeHandle(ref, () => ({
    goToLine(line: number) {
      const el = area.current
      if (!el) return
      const start = offsetOfLine(value, line)
      const endAt = value.indexOf('\n', start)
      el.focus({ preventScroll: true })
      el.setSelectionRange(start, endAt < 0 ? value.length : endAt)
      const box = scroller.current
      if (box) box.scrollTop = Math.max(0, (line - 1) * LINE_HEIGHT - box.clientHeight / 3)
    },
    showLine(line: number) {
      const box = scroller.current
      if (box) box.scrollTop = Math.max(0, (line - 1) * LINE_HEIGHT - box.clientHeight / 3)
    },
  }), [value])

  return (
    <div className="code-editor" ref={scroller}>
      <div className="code-gutter" aria-hidden="true">
        {Array.from({ length: lines }, (_, i) => {
          const messages = byLine.get(i + 1)
          return (
            <div key={i} className={messages ? 'gutter-line has-error' : 'gutter-line'} title={messages?.join('\n')}>
              {i + 1}
            </div>
          )
        })}
      </div>
      <div className="code-body">
        <div className="code-marks" aria-hidden="true">
          {[...byLine.entries()].map(([line, messages]) => (
            <div
              key={line}
              className="code-mark"
              data-testid="error-line"
              data-line={line}
              style={{ top: (line - 1) * LINE_HEIGHT }}
              title={messages.join('\n')}
            >
              <span className="code-mark-msg">{messages.join(' · ')}</span>
            </div>
          ))}
        </div>
        <textarea
          id={id}
          ref={area}
          className="code-text"
          value={value}
          onChange={(e) => onChange(e.target.value)}
          spellCheck={false}
          autoCapitalize="off"
          autoComplete="off"
          autoCorrect="off"
          wrap="off"
          rows={lines}
          aria-label={label}
          aria-describedby={describedBy}
          aria-invalid={marks.length > 0}
          style={{ height: lines * LINE_HEIGHT + 24 }}
        />
      </div>
    </div>
  )
})
