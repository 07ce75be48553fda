// Live validation in the designer: every change of what the server reads is sent to POST /templates/validate (after
// a pause in the typing; only the newest answer is shown), and the errors are put where they belong — on the nodes
// and edges they name (lib/validation.ts), a cycle's edges drawn red — and summed up beside the title.
import { computed, getCurrentScope, onScopeDispose, ref, watch, type Ref } from 'vue'
import { api } from '@/api'
import { errorMessage } from '@/api/client'
import { t } from '@/i18n'
import { cleanDefinition, type Definition } from '@/lib/definition'
import { computeHighlights, latestOnly, type ValidationError, type ValidationResult } from '@/lib/validation'

/** What validation looks at: the definition, and the canvas it is drawn on (for the highlights). */
export interface ValidationSource {
  definition: Ref<Definition>
  semanticKey: Ref<string>
  nodes: Ref<{ id: string }[]>
  edges: Ref<{ id: string; source: string; target: string; class?: unknown; animated?: boolean }[]>
}

/** The server's answer to a validation (POST /templates/validate, or a saved draft's). */
export type ValidationAnswer = { valid?: boolean; errors?: ValidationError[] | null; warnings?: ValidationError[] | null }

export interface LiveValidationOptions {
  /** how a definition is validated (default: the API) */
  validate?: (def: Definition) => Promise<ValidationAnswer>
  /** the pause after a change before it is sent, in milliseconds */
  delay?: number
}

export function useLiveValidation(s: ValidationSource, o: LiveValidationOptions = {}) {
  const validate = o.validate ?? ((def: Definition) => api.validate(def))
  const delay = o.delay ?? 400
  const result = ref<ValidationResult | null>(null)
  const validating = ref(false)
  /** why the last validation could not be had ('' when it was) */
  const failure = ref('')
  const guard = latestOnly()
  let timer: ReturnType<typeof setTimeout> | undefined

  /** accept shows a validation the designer got otherwise (a saved draft's, a refused publish's). */
  function accept(a: ValidationAnswer) {
    result.value = { valid: !!a.valid, errors: a.errors ?? [], warnings: a.warnings ?? [] }
  }

  /** validateNow sends the definition as it is now; an answer that a newer request overtook is dropped. */
  async function validateNow() {
    const token = guard.next()
    validating.value = true
    try {
      const r = await validate(cleanDefinition(s.definition.value))
      if (guard.isLatest(token)) {
        accept(r)
        failure.value = ''
      }
    } catch (e) {
      if (guard.isLatest(token)) failure.value = errorMessage(e)
    } finally {
      if (guard.isLatest(token)) validating.value = false
    }
  }
  watch(s.semanticKey, () => {
    clearTimeout(timer)
    timer = setTimeout(validateNow, delay)
  })
  if (getCurrentScope()) onScopeDispose(() => clearTimeout(timer))

  const errors = computed<ValidationError[]>(() => result.value?.errors ?? [])
  const warnings = computed<ValidationError[]>(() => result.value?.warnings ?? [])
  const highlights = computed(() =>
    computeHighlights(
      errors.value,
      s.nodes.value.map((n) => n.id),
      s.edges.value.map((e) => ({ id: e.id, source: e.source, target: e.target })),
    ),
  )
  // An edge an error names (a cycle's, one to a missing node) is drawn red and moving.
  watch(highlights, (h) => {
    for (const e of s.edges.value) {
      const bad = !!h.edges[e.id]
      e.class = bad ? 'edge-error' : ''
      e.animated = bad
    }
  })

  /** the status beside the title: valid, how many problems, still checking, or why validation is unavailable */
  const status = computed(() => {
    if (failure.value) return { cls: 'warn', text: t('designer.validationUnavailable', { message: failure.value }) }
    if (!result.value) return { cls: 'muted', text: validating.value ? t('designer.checking') : '' }
    if (result.value.valid) return { cls: 'ok', text: validating.value ? t('designer.validChecking') : t('designer.valid') }
    const n = result.value.errors.length
    return { cls: 'bad', text: `✗ ${t('designer.problems', { n }, n)}${validating.value ? ' ' + t('designer.stillChecking') : ''}` }
  })

  return { result, validating, failure, errors, warnings, highlights, status, accept, validateNow }
}

export type LiveValidation = ReturnType<typeof useLiveValidation>
