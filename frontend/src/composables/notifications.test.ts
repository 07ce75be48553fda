import { describe, expect, it, vi } from 'vitest'
import { setLanguage } from '@/i18n'
import { notificationEventLabel } from '@/i18n/words'
import { session } from '@/stores/session'

// GET /notifications as each token's user sees it; bob's answer is held until the test releases it.
let releaseBob: () => void = () => {}
vi.mock('@/api', () => ({
  api: {
    notifications: vi.fn(async () => {
      if (session.state.token === 'alice') return { items: [{ id: 'n1', read: false }, { id: 'n2', read: false }], unread: 2 }
      await new Promise<void>((r) => (releaseBob = r))
      return { items: [], unread: 0 }
    }),
    notificationRead: vi.fn(async () => undefined),
  },
}))

const { markRead, notifications, phonePath, refreshNotifications } = await import('./notifications')

describe('notifications', () => {
  it('open a task on its phone page, the inbox as the phone inbox, other pages as they are', () => {
    expect(phonePath('/tasks/i1-t2')).toBe('/m/tasks/i1-t2')
    expect(phonePath('/inbox')).toBe('/m/inbox')
    expect(phonePath('/instances/i1')).toBe('/instances/i1')
  })
  it('name the notified events, and show an unknown one as it came', () => {
    setLanguage('zh-CN', false)
    expect(notificationEventLabel('task.created')).toBe('新待办')
    expect(notificationEventLabel('instance.completed')).toBe('申请已通过')
    setLanguage('en', false)
    expect(notificationEventLabel('task.returned')).toBe('Returned to you')
    expect(notificationEventLabel('task.auto_approved')).toBe('task.auto_approved')
  })
  it('count the unread ones of whoever is signed in, never the previous user\'s', async () => {
    const { items, unread } = notifications
    session.state.token = 'alice'
    await refreshNotifications()
    expect(unread.value).toBe(2)
    await markRead(items.value[0])
    expect([unread.value, items.value[0].read]).toEqual([1, true])
    session.state.token = 'bob'
    const bob = refreshNotifications()
    expect([unread.value, items.value.length]).toEqual([0, 0]) // while bob's answer is on its way
    releaseBob()
    await bob
    expect(unread.value).toBe(0)
  })
})
