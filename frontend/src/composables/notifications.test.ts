import { describe, expect, it } from 'vitest'
import { phonePath } from './notifications'
import { notificationEventLabel } from '@/i18n/words'
import { setLanguage } from '@/i18n'

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
})
