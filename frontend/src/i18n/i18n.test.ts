import { afterEach, describe, expect, it, vi } from 'vitest'
import en from './en'
import zhCN from './zh-CN'
import { browserLanguage, chosenLanguage, isLanguage } from './lang'
import { setLanguage, t } from './index'
import { useDirectory } from '@/stores/directory'
import type { User } from '@/api'
import { actionLabel, actorLabel, errorText, historyNote, statusLabel } from './words'
import { messageKeys } from '@/testing/messages'

const get = (o: unknown, path: string) => path.split('.').reduce((a, k) => (a as Record<string, unknown>)[k], o) as string

function params(s: string): string[] {
  return [...new Set([...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))].sort()
}

describe('messages', () => {
  it('has the same keys in both languages, none empty', () => {
    expect(messageKeys(zhCN).sort()).toEqual(messageKeys(en).sort())
    for (const k of messageKeys(zhCN)) expect(get(zhCN, k).trim(), k).not.toBe('')
  })
  it('uses the same placeholders in both languages', () => {
    for (const k of messageKeys(en)) expect([k, params(get(zhCN, k))]).toEqual([k, params(get(en, k))])
  })
  it('translates: no Chinese message is the English one (names, symbols and placeholders aside)', () => {
    const same = messageKeys(en).filter((k) => {
      const words = get(en, k).replace(/\{\w+\}/g, '')
      return /[a-z]{3}/i.test(words) && get(en, k) === get(zhCN, k)
    })
    expect(same).toEqual([])
  })
  it('compile in both languages (no stray { } @ | in a message)', () => {
    for (const lang of ['en', 'zh-CN'] as const) {
      for (const k of messageKeys(en)) {
        const out = t(k, { n: 2, name: 'x' }, { locale: lang })
        expect(out, `${lang} ${k}`).not.toBe(k)
        expect(out, `${lang} ${k}`).not.toMatch(/^\s*$/)
      }
    }
  })
})

describe('engine words', () => {
  afterEach(() => setLanguage('en', false))

  it('explain the three joins in one sentence each', () => {
    for (const lang of ['en', 'zh-CN'] as const) {
      for (const k of ['andHelp', 'orHelp', 'minHelp']) {
        const text = t(`join.${k}`, {}, { locale: lang })
        expect(text.split(/[.。]\s*/).filter(Boolean), `${lang} ${k}`).toHaveLength(1)
      }
    }
  })

  it('say node errors in words, and unknown codes with the code', () => {
    setLanguage('en', false)
    expect(errorText('no_approver')).toMatch(/Nobody could be found/)
    expect(errorText('plugin_timeout')).toMatch(/did not finish in time/)
    expect(errorText('something_new')).toBe('A step failed with error “something_new”.')
    expect(errorText('title')).toBe('A step failed with error “title”.')
    expect(t('nodeError.atStep', { node: 'Grant' })).toBe('at step “Grant”')
    setLanguage('zh-CN', false)
    expect(errorText('no_approver')).toMatch(/审批人/)
    expect(errorText('something_new')).toBe('步骤出错，错误代码“something_new”。')
  })

  it('name every history action the engine writes, and show unknown ones as they came', () => {
    // The actions of service/engine (run.history); a new one shows its code until it has words.
    const actions = `instance.started instance.completed instance.rejected instance.terminated instance.failed instance.withdrawn
      instance.jumped instance.resubmitted node.activated node.completed node.rejected node.skipped node.failed node.error
      node.error_caught node.error_ignored node.ignored node.retry_scheduled node.timeout_approved node.timeout_rejected
      node.timeout_branch task.created task.approved task.rejected task.transferred task.add_sign task.returned task.reclaimed
      task.pending task.reminder task.resumed plugin.queued plugin.succeeded plugin.failed plugin.timed_out plugin.waiting
      timer.fired message.received message.matched bookmark.resumed callback.received cc.sent cc.unresolved approver.dropped
      context.changed error.thrown`.split(/\s+/)
    for (const lang of ['en', 'zh-CN'] as const) {
      setLanguage(lang, false)
      for (const a of actions) expect(actionLabel(a), `${lang} ${a}`).not.toBe(a)
    }
    expect(actionLabel('task.approved')).toBe('同意')
    expect(actionLabel('task.something_new')).toBe('task.something_new')
    expect(actionLabel('task')).toBe('task') // a section, not a message
  })

  it('name the synthetic actors and leave people as they are', () => {
    setLanguage('zh-CN', false)
    expect(actorLabel('system')).toBe('系统')
    expect(actorLabel('')).toBe('系统')
    expect(actorLabel('system:cron')).toBe('定时任务')
    expect(actorLabel('system:anonymous')).toBe('匿名表单')
    expect(actorLabel('token:billing')).toBe('API 令牌 billing')
    expect(actorLabel('plugin:create-cache')).toBe('插件 create-cache')
    expect(actorLabel('alice')).toBe('alice')
    setLanguage('en', false)
    expect(actorLabel('system:cron')).toBe('Schedule')
  })

  it('name people by their display name once the directory is loaded', () => {
    const { users } = useDirectory()
    users.value = [{ username: 'zhangsan', display_name: '张三' } as User, { username: 'bob' } as User]
    try {
      expect(actorLabel('zhangsan')).toBe('张三')
      expect(actorLabel('bob')).toBe('bob') // no display name
      expect(actorLabel('carol')).toBe('carol') // not in the directory (deleted since)
      expect(actorLabel('system:cron')).toBe('Schedule')
    } finally {
      users.value = []
    }
  })

  it('keep a person\'s comment, and say the engine\'s notes through their error code', () => {
    const failed = { action: 'node.error', comment: 'plugin grant exited with status 1', data: { code: 'plugin_failed', node_id: 'grant' } }
    const caught = { action: 'node.error_caught', comment: 'no approver of node "x"', data: { branch: 'fix', code: 'no_approver' } }
    const instanceFailed = { action: 'instance.failed', comment: 'grant failed', data: { error: { code: 'plugin_timeout' } } }
    const timedOut = { action: 'plugin.timed_out', comment: 'run r1 passed its 30s timeout', data: { run_id: 'r1' } }
    const approved = { action: 'task.approved', comment: 'OK from the phone' }
    setLanguage('en', false)
    expect(historyNote(approved)).toEqual({ comment: 'OK from the phone' })
    expect(historyNote(failed)).toEqual({ note: 'plugin grant exited with status 1' })
    setLanguage('zh-CN', false)
    expect(historyNote(approved)).toEqual({ comment: 'OK from the phone' })
    expect(historyNote(failed)).toEqual({ note: '插件（对其他系统的自动调用）执行失败。', detail: 'plugin grant exited with status 1' })
    expect(historyNote(caught).note).toMatch(/审批人/)
    expect(historyNote(instanceFailed).note).toMatch(/时限/)
    expect(historyNote(timedOut)).toEqual({ detail: 'run r1 passed its 30s timeout' })
    expect(historyNote({ action: 'node.activated' })).toEqual({})
  })

  it('name statuses, and show an unknown one as it came', () => {
    setLanguage('zh-CN', false)
    expect(statusLabel('timed_out')).toBe('超时')
    expect(statusLabel('archived_later')).toBe('archived_later')
    expect(statusLabel(undefined)).toBe('未知')
  })
})

describe('browserLanguage', () => {
  it.each([
    [['zh-CN'], 'zh-CN'],
    [['zh-TW', 'en'], 'zh-CN'],
    [['zh'], 'zh-CN'],
    [['en-US', 'zh-CN'], 'en'],
    [['fr-FR', 'zh-CN'], 'zh-CN'],
    [['fr-FR'], 'en'],
    [[], 'en'],
  ])('%j → %s', (langs, want) => {
    expect(browserLanguage(langs)).toBe(want)
  })
  it('knows its languages', () => {
    expect(isLanguage('zh-CN')).toBe(true)
    expect(isLanguage('en')).toBe(true)
    expect(isLanguage('fr')).toBe(false)
    expect(isLanguage('')).toBe(false)
  })
})

describe('chosenLanguage', () => {
  afterEach(() => vi.unstubAllGlobals())
  it('follows the language chosen on this browser, else the browser', () => {
    const store: Record<string, string> = {}
    vi.stubGlobal('localStorage', { getItem: (k: string) => store[k] ?? null })
    vi.stubGlobal('navigator', { languages: ['zh-TW', 'en'], language: 'zh-TW' })
    expect(chosenLanguage()).toBe('zh-CN')
    store['halley.language'] = 'en'
    expect(chosenLanguage()).toBe('en')
    store['halley.language'] = 'fr'
    expect(chosenLanguage()).toBe('zh-CN')
    delete store['halley.language']
    vi.stubGlobal('navigator', { languages: ['fr', 'en-GB'], language: 'fr' })
    expect(chosenLanguage()).toBe('en')
  })
})
