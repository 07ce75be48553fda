import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { createMemoryHistory, createRouter, type RouteRecordRaw } from 'vue-router'
import type { Me } from '@/api'
import { guard, routes } from '@/routes'
import { session } from '@/stores/session'
import { PHONE_MAX_WIDTH, PHONE_QUERY, isPhone, phoneRoute } from './device'

/** viewport makes the (absent) browser window answer media queries as a screen of that width would. */
function viewport(width: number) {
  vi.stubGlobal('window', {
    matchMedia: (q: string) => {
      const m = /^\(max-width: (\d+)px\)$/.exec(q)
      return { matches: !!m && width <= Number(m[1]) }
    },
  })
}

describe('what counts as a phone', () => {
  afterEach(() => vi.unstubAllGlobals())
  it('is a viewport at most PHONE_MAX_WIDTH wide', () => {
    expect(PHONE_QUERY).toBe(`(max-width: ${PHONE_MAX_WIDTH}px)`)
    for (const [w, phone] of [[390, true], [767, true], [768, false], [1280, false]] as const) {
      viewport(w)
      expect([w, isPhone()]).toEqual([w, phone])
    }
    vi.unstubAllGlobals()
    expect(isPhone()).toBe(false) // no window at all
  })
})

describe('phoneRoute', () => {
  const to = { meta: { phone: 'm-task' }, params: { id: 't1' }, query: { from: 'mail' }, hash: '#history' }
  it('sends a phone to the page’s twin with the same params, query and hash', () => {
    expect(phoneRoute(to, true)).toEqual({ name: 'm-task', params: { id: 't1' }, query: { from: 'mail' }, hash: '#history', replace: true })
  })
  it('leaves a desktop, and pages without a twin, alone', () => {
    expect(phoneRoute(to, false)).toBeUndefined()
    expect(phoneRoute({ ...to, meta: {} }, true)).toBeUndefined()
  })
})

describe('the router’s device guard', () => {
  const Page = { render: () => null }
  const stubbed = routes.map((r) => ('component' in r && r.component ? { ...r, component: Page } : r)) as RouteRecordRaw[]
  async function land(path: string): Promise<string> {
    const router = createRouter({ history: createMemoryHistory(), routes: stubbed })
    router.beforeEach(guard)
    await router.push(path)
    return router.currentRoute.value.fullPath
  }
  beforeEach(() => {
    session.state.token = 'a-token'
    session.state.me = { username: 'bob', roles: [] } as unknown as Me
  })
  afterEach(() => {
    session.state.token = null
    session.state.me = null
    vi.unstubAllGlobals()
  })

  it('takes a phone to the phone pages, keeping the task and the query', async () => {
    viewport(390)
    expect(await land('/')).toBe('/m/inbox')
    expect(await land('/inbox')).toBe('/m/inbox')
    expect(await land('/tasks/t1?from=mail')).toBe('/m/tasks/t1?from=mail')
    expect(await land('/start/leave')).toBe('/m/start/leave')
    // Pages without a phone twin stay what they are (they fit a phone).
    expect(await land('/requests')).toBe('/requests')
    expect(await land('/profile')).toBe('/profile')
    expect(await land('/m/tasks/t1')).toBe('/m/tasks/t1')
  })

  it('leaves a desktop on the desktop pages', async () => {
    viewport(1280)
    expect(await land('/')).toBe('/inbox')
    expect(await land('/tasks/t1')).toBe('/tasks/t1')
    expect(await land('/start/leave')).toBe('/start/leave')
  })

  it('still asks a stranger to sign in first, coming back to the page asked for', async () => {
    viewport(390)
    session.state.token = null
    session.state.me = null
    expect(await land('/tasks/t1')).toBe('/login?redirect=/tasks/t1')
  })

  it('names twins that exist and take the same params', () => {
    const byName = new Map(routes.filter((r) => r.name).map((r) => [r.name, r]))
    const params = (path: string) => [...path.matchAll(/:(\w+)/g)].map((m) => m[1])
    const twins = routes.filter((r) => r.meta?.phone)
    expect(twins.map((r) => r.path)).toEqual(['/inbox', '/tasks/:id', '/start/:tkey'])
    for (const r of twins) {
      const twin = byName.get(r.meta!.phone!)
      expect(twin, r.meta!.phone).toBeDefined()
      expect(params(twin!.path)).toEqual(params(r.path))
    }
  })
})

describe('the CSS says the same phone width', () => {
  // Widths that are not a phone's but a layout's own: where the designer stacks its three columns, and where the
  // pages' two columns become one.
  const LAYOUT_WIDTHS = new Set([800, 1000])
  const SRC = join(import.meta.dirname, '..')
  function sources(dir: string): string[] {
    return readdirSync(dir).flatMap((name) => {
      const p = join(dir, name)
      if (statSync(p).isDirectory()) return sources(p)
      return /\.(vue|css)$/.test(name) ? [p] : []
    })
  }
  it(`writes its phone media queries as max-width: ${PHONE_MAX_WIDTH}px`, () => {
    const found: string[] = []
    for (const file of sources(SRC)) {
      for (const m of readFileSync(file, 'utf8').matchAll(/@media[^{]*\((max|min)-width:\s*(\d+)px\)/g)) {
        const w = Number(m[2])
        if (w === PHONE_MAX_WIDTH && m[1] === 'max') found.push(relative(SRC, file))
        else if (!LAYOUT_WIDTHS.has(w)) throw new Error(`${relative(SRC, file)}: ${m[0]} — a phone is max-width: ${PHONE_MAX_WIDTH}px (lib/device.ts)`)
      }
    }
    expect(found.length).toBeGreaterThan(0)
  })
})
