import { describe, expect, it, vi } from 'vitest'
import { session } from '@/stores/session'

// My pending tasks and copies, as the server answers them for each token's user; bob's inbox changes between polls.
let bobTasks = [{ id: 'i1.t1' }]
vi.mock('@/api', () => ({
  api: {
    tasks: vi.fn(async () => (session.state.token === 'alice' ? [] : bobTasks)),
    cc: vi.fn(async () => ({ items: session.state.token === 'alice' ? [{ id: 'c1', read: false }, { id: 'c2', read: true }, { id: 'c3', read: false }] : [] })),
  },
}))

const { live, refreshLive } = await import('./live')

describe('live state', () => {
  it('counts my pending tasks and unread copies, and changes its key when work arrives or is taken', async () => {
    session.state.token = 'bob'
    await refreshLive()
    expect([live.pending.value, live.ccUnread.value, live.pendingKey.value]).toEqual([1, 0, 'i1.t1'])
    const before = live.pendingKey.value
    bobTasks = [{ id: 'i2.t1' }, { id: 'i1.t1' }]
    await refreshLive()
    expect(live.pending.value).toBe(2)
    expect(live.pendingKey.value).not.toBe(before)
    expect(live.pendingKey.value).toBe('i1.t1,i2.t1')
    bobTasks = []
    await refreshLive()
    expect([live.pending.value, live.pendingKey.value]).toEqual([0, ''])
  })
  it('starts from nothing for another user', async () => {
    session.state.token = 'alice'
    await refreshLive()
    expect([live.pending.value, live.ccUnread.value]).toEqual([0, 2])
  })
})
