// Who is signed in. A plain reactive object is enough here: one session per tab, read by the header, the router
// guard and the pages.
import { computed, reactive } from 'vue'
import { api, type Me, type ProfileUpdate } from '@/api'
import { getToken, setToken } from '@/api/client'
import { setLanguage } from '@/i18n'

const state = reactive<{ token: string | null; me: Me | null; loading: boolean }>({
  token: getToken(),
  me: null,
  loading: false,
})

export const session = {
  state,
  isAdmin: computed(() => !!state.me?.roles?.includes('admin')),
  signedIn: computed(() => !!state.token),
  /** the user must choose a new password before anything else (bootstrap admin, admin reset) */
  mustChangePassword: computed(() => !!state.me?.password_change_required),

  async login(username: string, password: string): Promise<void> {
    const res = await api.login(username, password)
    setToken(res.token)
    state.token = res.token
    state.me = null
    await session.loadMe()
  },

  /** loadMe fetches GET /me once per sign-in; the router guard waits for it. It applies the user's language. */
  async loadMe(force = false): Promise<Me | null> {
    if (!state.token) return null
    if (state.me && !force) return state.me
    state.loading = true
    try {
      state.me = await api.me()
      if (state.me?.language) setLanguage(state.me.language)
      return state.me
    } finally {
      state.loading = false
    }
  },

  /** updateProfile saves PUT /me and keeps the session's copy (and the UI language) in step. */
  async updateProfile(p: ProfileUpdate): Promise<Me> {
    const me = await api.updateMe(p)
    state.me = { ...state.me, ...me }
    if (p.language !== undefined) setLanguage(p.language)
    return me
  },

  /**
   * changePassword is POST /me/password. The change ends every session of the user, this one too (the server
   * refuses tokens signed before it), so the tab signs in again with the new password.
   */
  async changePassword(oldPassword: string, newPassword: string): Promise<void> {
    const username = state.me?.username
    await api.changePassword(oldPassword, newPassword)
    if (!username) {
      session.logout()
      return
    }
    await session.login(username, newPassword)
  },

  logout(): void {
    setToken(null)
    state.token = null
    state.me = null
  },
}
