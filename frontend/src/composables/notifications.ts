// The signed-in user's in-app notifications, shared by the desktop bell and the phone pages: one list and one
// unread count, refreshed while a page that shows them is open (every 30 s) and after each change.
import { onMounted, onUnmounted, ref } from 'vue'
import { api, type AppNotification } from '@/api'
import { errorMessage } from '@/api/client'
import { session } from '@/stores/session'

const items = ref<AppNotification[]>([])
const unread = ref(0)
const loading = ref(false)
const error = ref('')
let users = 0
let timer: ReturnType<typeof setInterval> | undefined
// owner is the session the list belongs to: another sign-in starts from an empty list, never the last user's.
let owner: string | null = null

/** refreshNotifications reads the newest notifications and the unread count of whoever is signed in. */
export async function refreshNotifications(): Promise<void> {
  const token = session.state.token
  if (token !== owner) {
    owner = token
    items.value = []
    unread.value = 0
  }
  if (!token) return
  loading.value = true
  try {
    const page = await api.notifications({ limit: 30 })
    if (session.state.token !== token) return // signed out, or in as someone else, meanwhile
    items.value = page.items ?? []
    unread.value = page.unread ?? 0
    error.value = ''
  } catch (e) {
    error.value = errorMessage(e)
  } finally {
    loading.value = false
  }
}

/** markRead marks one notification read (once). */
export async function markRead(n: AppNotification): Promise<void> {
  if (n.read) return
  await api.notificationRead(n.id)
  n.read = true
  unread.value = Math.max(0, unread.value - 1)
}

/** markAllRead marks every notification of mine read. */
export async function markAllRead(): Promise<void> {
  await api.notificationsReadAll()
  for (const n of items.value) n.read = true
  unread.value = 0
}

/** phonePath is a notification's page on the phone: the task's H5 page, the phone inbox; other pages as they are. */
export function phonePath(link: string): string {
  if (link.startsWith('/tasks/')) return '/m' + link
  if (link === '/inbox') return '/m/inbox'
  return link
}

/** notifications is the shared state itself (tests read it without a component). */
export const notifications = { items, unread, loading, error }

/** useNotifications keeps the list fresh while the calling component is mounted. */
export function useNotifications() {
  onMounted(() => {
    users++
    void refreshNotifications()
    if (users === 1) timer = setInterval(() => void refreshNotifications(), 30_000)
  })
  onUnmounted(() => {
    users--
    if (users === 0 && timer) {
      clearInterval(timer)
      timer = undefined
    }
  })
  return { items, unread, loading, error }
}
