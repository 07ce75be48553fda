// Who is signed in. A plain reactive object is enough here: one session per tab, read by the header, the router
// guard and the pages.
import { computed, reactive } from 'vue'
import { api, type Me } from '@/api'
import { getToken, setToken } from '@/api/client'

const state = reactive<{ token: string | null; me: Me | null; loading: boolean }>({
  token: getToken(),
  me: null,
  loading: false,
})

export const session = {
  state,
  isAdmin: computed(() => !!state.me?.roles?.includes('admin')),
  signedIn: computed(() => !!state.token),

  async login(username: string, password: string): Promise<void> {
    const res = await api.login(username, password)
    setToken(res.token)
    state.token = res.token
    state.me = null
    await session.loadMe()
  },

  /** loadMe fetches GET /me once per sign-in; the router guard waits for it. */
  async loadMe(force = false): Promise<Me | null> {
    if (!state.token) return null
    if (state.me && !force) return state.me
    state.loading = true
    try {
      state.me = await api.me()
      return state.me
    } finally {
      state.loading = false
    }
  },

  logout(): void {
    setToken(null)
    state.token = null
    state.me = null
  },
}
