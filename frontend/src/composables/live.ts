// Live state, shared by the desktop header, the inbox pages and the phone inbox: how many tasks wait for me, how
// many copies I have not read, and a signature of my pending tasks that changes when work arrives or is taken.
// Polled every 15 s while a page that shows it is open and the tab is visible (and at once when the tab comes
// back): the lists answer 304 to an unchanged ETag (the browser revalidates by itself), so a quiet poll costs a
// few bytes. Polling rather than server-sent events: it works through every proxy and on every replica without
// a fan-out channel (docs/ui.md "Live state").
import { onMounted, onUnmounted, ref } from 'vue'
import { api } from '@/api'
import { session } from '@/stores/session'

export const LIVE_INTERVAL_MS = 15_000

const pending = ref(0)
const ccUnread = ref(0)
/** the ids of my pending tasks, joined: a page reloads its list when it changes */
const pendingKey = ref('')
let users = 0
let timer: ReturnType<typeof setInterval> | undefined
let owner: string | null = null

/** refreshLive reads my pending tasks and unread copies; errors leave the last counts (the next poll retries). */
export async function refreshLive(): Promise<void> {
  const token = session.state.token
  if (token !== owner) {
    owner = token
    pending.value = 0
    ccUnread.value = 0
    pendingKey.value = ''
  }
  if (!token || session.state.me?.token) return
  try {
    const [tasks, cc] = await Promise.all([api.tasks({ assignee: 'me', status: 'pending' }), api.cc()])
    if (session.state.token !== token) return
    pending.value = tasks.length
    pendingKey.value = tasks
      .map((t) => t.id)
      .sort()
      .join(',')
    ccUnread.value = (cc.items ?? []).filter((c) => c.read === false).length
  } catch {
    /* shown by the pages themselves; the counts stay */
  }
}

function onVisible() {
  if (document.visibilityState === 'visible') void refreshLive()
}

/** live is the shared state itself (tests read it without a component). */
export const live = { pending, ccUnread, pendingKey }

/** useLive keeps the counts fresh while the calling component is mounted. */
export function useLive() {
  onMounted(() => {
    users++
    if (users === 1) {
      void refreshLive()
      timer = setInterval(() => document.visibilityState === 'visible' && void refreshLive(), LIVE_INTERVAL_MS)
      document.addEventListener('visibilitychange', onVisible)
    }
  })
  onUnmounted(() => {
    users--
    if (users === 0) {
      if (timer) clearInterval(timer)
      timer = undefined
      document.removeEventListener('visibilitychange', onVisible)
    }
  })
  return live
}
