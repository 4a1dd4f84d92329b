import { useState } from 'react'
import { ApiError, request } from '../api'
import type { Me } from '../types'
import { errorText } from '../util'

interface Props {
  notice: string | null
  onSignedIn: (token: string, me: Me) => void
}

export function SignIn({ notice, onSignedIn }: Props) {
  const [token, setToken] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const submit = async (e: React.FormEvent) => {
    e.preventDefault()
    const t = token.trim()
    if (!t) {
      setError('Enter an API token.')
      return
    }
    setBusy(true)
    setError(null)
    try {
      const me = await request<Me>('/me', { token: t })
      onSignedIn(t, me)
    } catch (exc) {
      setError(exc instanceof ApiError && exc.status === 401 ? `${exc.detail} Check the token and try again.` : errorText(exc))
    } finally {
      setBusy(false)
    }
  }

  return (
    <main className="signin" id="main">
      <form onSubmit={submit} className="card signin-card" aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in to dhub</h1>
        <p className="muted">
          Use an API token. The first one is in <code>admin.token</code> in the server&apos;s data
          directory; <code>dhub</code> users get theirs from an admin. It is kept in this browser tab
          only, until you sign out or close it.
        </p>
        {notice && <p className="notice" role="status">{notice}</p>}
        <label htmlFor="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autoComplete="current-password"
          value={token}
          onChange={(e) => setToken(e.target.value)}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? 'token-error' : undefined}
          autoFocus
        />
        {error && <p id="token-error" className="field-error" role="alert">{error}</p>}
        <button type="submit" className="primary" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </main>
  )
}
