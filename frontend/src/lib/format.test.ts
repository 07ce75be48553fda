import { describe, expect, it } from 'vitest'
import { formatDuration, statusTag, timeAgo } from './format'

describe('timeAgo', () => {
  const now = new Date('2025-01-10T12:00:00Z')
  it.each([
    ['2025-01-10T11:59:30Z', 'just now'],
    ['2025-01-10T11:45:00Z', '15 min ago'],
    ['2025-01-10T09:00:00Z', '3 h ago'],
    ['2025-01-08T12:00:00Z', '2 d ago'],
    ['2024-10-01T00:00:00Z', '2024-10-01'],
    ['', '—'],
    ['garbage', '—'],
  ])('%s → %s', (iso, want) => expect(timeAgo(iso, now)).toBe(want))
})

describe('formatDuration', () => {
  it.each([
    [12, '12 ms'],
    [1500, '1.50 s'],
    [42000, '42.0 s'],
    [125000, '2 min 5 s'],
  ])('%d ms → %s', (ms, want) => expect(formatDuration(ms)).toBe(want))
})

describe('statusTag', () => {
  it('colours good, running, bad and other statuses', () => {
    expect(statusTag('completed')).toBe('success')
    expect(statusTag('pending')).toBe('primary')
    expect(statusTag('timed_out')).toBe('danger')
    expect(statusTag('cancelled')).toBe('info')
  })
})
