import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { computed, effectScope, nextTick, ref } from 'vue'
import { ApiError } from '@/api/client'
import { setLanguage } from '@/i18n'
import { cleanDefinition, type Definition } from '@/lib/definition'
import { useLiveValidation, type ValidationAnswer } from './useLiveValidation'

/** A fake POST /templates/validate: each call waits until the test answers it. */
function server() {
  const calls: { def: Definition; answer: (a: ValidationAnswer) => void; fail: (e: unknown) => void }[] = []
  const validate = (def: Definition) =>
    new Promise<ValidationAnswer>((answer, fail) => {
      calls.push({ def, answer, fail })
    })
  return { calls, validate }
}

const graph = (): Definition => ({
  nodes: [
    { id: 'start', type: 'start', trigger: { kind: 'manual' } },
    { id: 'a', type: 'approval' },
    { id: 'b', type: 'approval', approvers: { users: ['bob'] } },
    { id: 'end', type: 'end' },
  ],
  edges: [
    { from: 'start', to: 'a' },
    { from: 'a', to: 'b' },
    { from: 'b', to: 'a' },
    { from: 'b', to: 'end' },
  ],
})

function designer() {
  const def = ref<Definition>(graph())
  const edges = ref(def.value.edges.map((e, i) => ({ id: `e${i}`, source: e.from, target: e.to, class: '' as unknown, animated: false })))
  const source = {
    definition: def,
    semanticKey: computed(() => JSON.stringify(cleanDefinition(def.value))),
    nodes: computed(() => def.value.nodes.map((n) => ({ id: n.id }))),
    edges,
  }
  const srv = server()
  const scope = effectScope()
  const v = scope.run(() => useLiveValidation(source, { validate: srv.validate, delay: 400 }))!
  return { def, edges, v, srv, scope }
}

const settle = async () => {
  await nextTick()
  await Promise.resolve()
}

describe('useLiveValidation', () => {
  beforeEach(() => {
    vi.useFakeTimers()
    setLanguage('en', false)
  })
  afterEach(() => vi.useRealTimers())

  it('sends a change after the pause, once for a burst of changes, the definition as the server reads it', async () => {
    const d = designer()
    d.def.value = { ...d.def.value, nodes: d.def.value.nodes.map((n) => (n.id === 'a' ? { ...n, name: 'L' } : n)) }
    await nextTick()
    vi.advanceTimersByTime(300)
    d.def.value = { ...d.def.value, nodes: d.def.value.nodes.map((n) => (n.id === 'a' ? { ...n, name: 'Lead' } : n)) }
    await nextTick()
    vi.advanceTimersByTime(399)
    expect(d.srv.calls).toHaveLength(0)
    vi.advanceTimersByTime(1)
    expect(d.srv.calls).toHaveLength(1)
    expect(d.srv.calls[0].def.nodes.find((n) => n.id === 'a')?.name).toBe('Lead')
    expect(d.v.status.value).toEqual({ cls: 'muted', text: 'Checking…' })
    d.scope.stop()
  })

  it('shows only the newest answer when answers come back out of order', async () => {
    const d = designer()
    d.v.validateNow()
    d.v.validateNow()
    const [older, newer] = d.srv.calls
    newer.answer({ valid: true, errors: [] })
    await settle()
    older.answer({ valid: false, errors: [{ code: 'no_end', message: 'no end' }] })
    await settle()
    expect(d.v.result.value).toEqual({ valid: true, errors: [], warnings: [] })
    expect(d.v.validating.value).toBe(false)
    expect(d.v.status.value.cls).toBe('ok')
  })

  it('puts errors on the nodes they name and draws a cycle’s edges red', async () => {
    const d = designer()
    d.v.validateNow()
    d.srv.calls[0].answer({
      valid: false,
      errors: [
        { code: 'no_approver', message: 'approval node a has no approvers', nodes: ['a'] },
        { code: 'cycle', message: 'a cycle', nodes: ['a', 'b'] },
      ],
      warnings: [{ code: 'unknown_user', message: 'bob is no user', nodes: ['b'] }],
    })
    await settle()
    await nextTick()
    expect(Object.keys(d.v.highlights.value.nodes).sort()).toEqual(['a', 'b'])
    expect(d.v.highlights.value.nodes.a.map((e) => e.code)).toEqual(['no_approver', 'cycle'])
    expect(d.edges.value.map((e) => [e.id, e.class, e.animated])).toEqual([
      ['e0', '', false],
      ['e1', 'edge-error', true],
      ['e2', 'edge-error', true],
      ['e3', '', false],
    ])
    expect(d.v.warnings.value.map((w) => w.code)).toEqual(['unknown_user'])
    expect(d.v.status.value).toEqual({ cls: 'bad', text: '✗ 2 problems' })
  })

  it('says when validation is unavailable, and shows a saved draft’s validation', async () => {
    const d = designer()
    d.v.validateNow()
    d.srv.calls[0].fail(new ApiError(503, 'unavailable', 'database down'))
    await settle()
    expect(d.v.status.value.cls).toBe('warn')
    expect(d.v.status.value.text).toContain('database down')
    d.v.validateNow()
    d.srv.calls[1].answer({ valid: true })
    await settle()
    expect(d.v.status.value).toEqual({ cls: 'ok', text: expect.any(String) })
    d.v.accept({ valid: false, errors: [{ code: 'no_end', message: 'no end' }] })
    expect(d.v.errors.value.map((e) => e.code)).toEqual(['no_end'])
  })

  it('sends nothing after the designer closed', async () => {
    const d = designer()
    d.def.value = { ...d.def.value, edges: d.def.value.edges.slice(0, 2) }
    await nextTick()
    d.scope.stop()
    vi.advanceTimersByTime(1000)
    expect(d.srv.calls).toHaveLength(0)
  })
})
