import { describe, expect, it } from 'vitest'
import { formatDuration, formatTime, statusTag, timeAgo } from './format'

describe('timeAgo', () => {
  const now = new Date('2025-01-10T12:00:00Z')
  it.each([
    ['2025-01-10T11:59:30Z', 'just now', '刚刚'],
    ['2025-01-10T11:45:00Z', '15 minutes ago', '15分钟前'],
    ['2025-01-10T11:59:00Z', '1 minute ago', '1分钟前'],
    ['2025-01-10T09:00:00Z', '3 hours ago', '3小时前'],
    ['2025-01-08T12:00:00Z', '2 days ago', '2天前'],
    ['2024-10-01T12:00:00Z', 'Oct 1, 2024', '2024年10月1日'],
    ['', '—', '—'],
    ['garbage', '—', '—'],
  ])('%s → %s / %s', (iso, en, zh) => {
    expect(timeAgo(iso, now, 'en')).toBe(en)
    expect(timeAgo(iso, now, 'zh-CN')).toBe(zh)
  })
})

describe('formatTime', () => {
  it('writes the month as a word, the time on 24 hours, in each language', () => {
    expect(formatTime('2025-01-10T14:05:09Z', 'en', 'UTC')).toBe('Jan 10, 2025, 14:05:09')
    expect(formatTime('2025-01-10T14:05:09Z', 'zh-CN', 'UTC')).toBe('2025年1月10日 14:05:09')
    expect(formatTime('2025-01-10T14:05:09Z', 'zh-CN', 'Asia/Shanghai')).toBe('2025年1月10日 22:05:09')
    expect(formatTime(undefined, 'en')).toBe('—')
    expect(formatTime('not a time', 'en')).toBe('not a time')
  })
})

describe('formatDuration', () => {
  it.each([
    [12, '12 ms', '12 毫秒'],
    [1500, '1.50 s', '1.50 秒'],
    [42000, '42.0 s', '42.0 秒'],
    [125000, '2 min 5 s', '2 分 5 秒'],
  ])('%d ms → %s / %s', (ms, en, zh) => {
    expect(formatDuration(ms, 'en')).toBe(en)
    expect(formatDuration(ms, 'zh-CN')).toBe(zh)
  })
})

describe('statusTag', () => {
  it('colours good, running, bad and other statuses', () => {
    expect(statusTag('completed')).toBe('success')
    expect(statusTag('pending')).toBe('primary')
    expect(statusTag('timed_out')).toBe('danger')
    expect(statusTag('cancelled')).toBe('info')
  })
})
