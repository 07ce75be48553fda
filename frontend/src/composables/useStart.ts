// Starting a request, for the desktop and the phone start pages alike: the template, its start form (its own or
// one generated from the definition, lib/startForm.ts), the values, and submit — which never sends a form that
// does not validate, nor data whose JSON does not parse. A form-triggered template submits through
// POST /forms/{key}/submit, any other through POST /instances (an admin overriding an automatic trigger).
import { computed, ref, shallowRef } from 'vue'
import { api, type Template } from '@/api'
import { ApiError, errorMessage } from '@/api/client'
import type { Definition, Trigger } from '@/lib/definition'
import { formOf, initialValues, validateValues, valuesToContext, type FormSchema } from '@/lib/form'
import { startFormOf } from '@/lib/startForm'
import { language, t } from '@/i18n'
import { session } from '@/stores/session'

export type StartMode = 'form' | 'manual' | 'automatic'

export function useStart(tkey: () => string) {
  const template = ref<Template | null>(null)
  const def = shallowRef<Definition | undefined>()
  const trigger = ref<Trigger | null>(null)
  const form = shallowRef<FormSchema | undefined>()
  const generated = ref(false)
  const values = ref<Record<string, unknown>>({})
  const errors = ref<Record<string, string>>({})
  const title = ref('')
  /** raw data (admins and API users): merged over the form's values */
  const raw = ref<unknown>(undefined)
  const rawError = ref('')
  const loading = ref(false)
  const busy = ref(false)
  const error = ref('')
  /** why the template or its form did not load (the page offers to try again) */
  const loadError = ref('')
  const notAllowed = ref('')
  const attempted = ref(false)

  const mode = computed<StartMode>(() => {
    const k = trigger.value?.kind
    if (k === 'form') return 'form'
    return !k || k === 'manual' ? 'manual' : 'automatic'
  })
  /** the raw JSON box: only for admins (and API users, who do not use this page) — and for an HTML form, which
   * this page cannot fill in */
  const showRaw = computed(() => session.isAdmin.value || form.value?.kind === 'html')

  async function load() {
    loading.value = true
    error.value = ''
    loadError.value = ''
    try {
      template.value = await api.template(tkey())
      const n = template.value.latest_version
      if (!n) throw new Error(t('start.notPublished'))
      def.value = await api
        .version(tkey(), n)
        .then((v) => v.definition as Definition)
        .catch(() => undefined)
      trigger.value = def.value?.nodes.find((x) => x.type === 'start')?.trigger ?? null
      if (!def.value || trigger.value?.kind === 'form') {
        try {
          const f = await api.form(tkey())
          form.value = formOf(f.form) ?? formOf(trigger.value?.form)
        } catch (e) {
          if (e instanceof ApiError && e.status === 403) notAllowed.value = e.serverMessage && language.value === 'en' ? e.serverMessage : t('start.notMember')
          else if (!(e instanceof ApiError && (e.status === 404 || e.status === 422))) throw e
          if (!form.value && trigger.value?.kind === 'form') form.value = formOf(trigger.value.form)
        }
      } else {
        const sf = startFormOf(def.value)
        form.value = sf?.schema
        generated.value = !!sf?.generated
      }
      values.value = initialValues(form.value, {})
    } catch (e) {
      loadError.value = errorMessage(e)
    } finally {
      loading.value = false
    }
  }

  /** check validates what would be sent: the form's fields, and the raw JSON when there is some. */
  function check(): boolean {
    attempted.value = true
    errors.value = form.value?.kind === 'components' ? validateValues(form.value, values.value) : {}
    return !Object.keys(errors.value).length && !rawError.value
  }

  function context(): Record<string, unknown> {
    const fromForm = form.value?.kind === 'components' ? valuesToContext(form.value, values.value) : {}
    const extra = raw.value && typeof raw.value === 'object' && !Array.isArray(raw.value) ? (raw.value as Record<string, unknown>) : {}
    return { ...fromForm, ...extra }
  }

  /** submit starts the request and answers the new instance's id and status, or undefined when the form is not
   * valid (nothing was sent). API errors are thrown. */
  async function submit(): Promise<{ id: string; status: string } | undefined> {
    if (!check()) return undefined
    busy.value = true
    try {
      if (mode.value === 'form') {
        const r = await api.submitForm(tkey(), context())
        return { id: r.id, status: r.status }
      }
      const override = mode.value === 'automatic' || undefined
      const r = await api.startInstance({ template: tkey(), context: context(), title: title.value.trim() || undefined, override_trigger: override })
      return { id: r.id, status: r.status }
    } finally {
      busy.value = false
    }
  }

  return { template, def, trigger, form, generated, values, errors, title, raw, rawError, loading, busy, error, loadError, notAllowed, attempted, mode, showRaw, load, check, submit }
}
