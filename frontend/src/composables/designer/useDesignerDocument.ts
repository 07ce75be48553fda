// The template a designer edits, as a document: loading its draft (or one published version, read-only), saving
// the draft, publishing it, its versions, restoring a version as the draft, importing and exporting a definition
// file, and whether there are unsaved changes (the page asks before they are left behind).
import { computed, nextTick, onBeforeUnmount, onMounted, ref, shallowRef, watch, type Ref } from 'vue'
import { onBeforeRouteLeave, useRouter } from 'vue-router'
import { api, draftDefinition, versionNumbers, type Template, type VersionSummary } from '@/api'
import { ApiError, errorMessage } from '@/api/client'
import { t } from '@/i18n'
import { cleanDefinition, layoutOf, parseDefinition, starterDefinition, type Definition } from '@/lib/definition'
import { confirm, notifyError, notifySuccess } from '@/lib/notify'
import { errorsFromDetails } from '@/lib/validation'
import { loadLayout, saveLayout } from './layoutStore'
import type { CanvasEditing } from './useCanvasEditing'
import type { DefinitionCanvas } from './useDefinitionCanvas'
import type { LiveValidation } from './useLiveValidation'

/** Which template a designer shows, and which of its versions (none: the draft, which it edits). */
export interface DesignerTarget {
  tkey: Ref<string>
  version: Ref<number | undefined>
  /** a published version is shown read-only */
  readonly: Ref<boolean>
}

/** designerTarget reads the designer's route props. */
export function designerTarget(props: { tkey: string; version?: number }): DesignerTarget {
  const version = computed(() => props.version)
  return { tkey: computed(() => props.tkey), version, readonly: computed(() => version.value !== undefined && !Number.isNaN(version.value)) }
}

export function useDesignerDocument(target: DesignerTarget, c: DefinitionCanvas, v: LiveValidation, editing: Pick<CanvasEditing, 'clearSelection'>) {
  const router = useRouter()
  const { tkey, version, readonly } = target
  const template = ref<Template | null>(null)
  const versions = ref<VersionSummary[]>([])
  const versionInfo = shallowRef<{ published_at?: string; published_by?: string } | null>(null)
  /** the plugins the node panels offer */
  const plugins = ref<string[]>([])
  const loading = ref(false)
  const loadError = ref('')
  const saving = ref(false)
  const publishing = ref(false)
  const savedKey = ref('')
  const dirty = computed(() => !readonly.value && savedKey.value !== '' && savedKey.value !== c.fullKey.value)

  /** open shows a definition, its positions taken from this browser when the definition has none for some node. */
  async function open(def: Definition, fit = true) {
    const positions = layoutOf(def)
    if (!positions || def.nodes.some((n) => !positions[n.id])) {
      const stored = loadLayout(tkey.value)
      if (stored && def.nodes.every((n) => stored[n.id])) def = { ...def, layout: stored }
    }
    await c.show(def, fit)
  }

  async function load() {
    loading.value = true
    loadError.value = ''
    try {
      template.value = await api.template(tkey.value)
      versions.value = versionNumbers(template.value)
      let def: Definition
      if (readonly.value) {
        const pv = await api.version(tkey.value, version.value!)
        versionInfo.value = { published_at: pv.published_at, published_by: pv.published_by }
        def = pv.definition
      } else {
        def = draftDefinition(template.value) ?? starterDefinition()
      }
      await open(def)
      await nextTick()
      savedKey.value = c.fullKey.value
      v.validateNow()
    } catch (e) {
      loadError.value = errorMessage(e)
    } finally {
      loading.value = false
    }
  }

  onMounted(() => {
    load()
    api.plugins().then(
      (p) => (plugins.value = p.map((x) => x.name)),
      () => {},
    )
    window.addEventListener('beforeunload', beforeUnload)
  })
  onBeforeUnmount(() => window.removeEventListener('beforeunload', beforeUnload))
  watch(() => [tkey.value, version.value], load)

  function beforeUnload(ev: BeforeUnloadEvent) {
    if (dirty.value) ev.preventDefault()
  }
  onBeforeRouteLeave(async () => (dirty.value ? await confirm(t('designer.leaveUnsaved')) : true))

  /** saveDraft saves the definition as the draft, even when invalid; true when it was saved. */
  async function saveDraft(): Promise<boolean> {
    saving.value = true
    const def = cleanDefinition(c.definition.value, { withLayout: true })
    try {
      let res
      try {
        res = await api.saveDraft(tkey.value, def)
      } catch (e) {
        // A server that refuses the designer's positions still gets the definition; they stay in this browser.
        if (e instanceof ApiError && e.status === 400 && /layout|meta/i.test(e.message)) res = await api.saveDraft(tkey.value, cleanDefinition(c.definition.value))
        else throw e
      }
      saveLayout(tkey.value, layoutOf(def) ?? {})
      savedKey.value = c.fullKey.value
      if (res?.validation) v.accept(res.validation)
      notifySuccess(res?.validation && !res.validation.valid ? t('designer.savedWithProblems') : t('designer.saved'))
      return true
    } catch (e) {
      notifyError(e)
      return false
    } finally {
      saving.value = false
    }
  }

  /** publish saves unsaved changes, then publishes the draft as the next version (after a confirmation). */
  async function publish() {
    if (dirty.value && !(await saveDraft())) return
    if (v.result.value && !v.result.value.valid) {
      notifyError(new Error(t('designer.fixFirst')))
      return
    }
    if (!(await confirm(t('designer.publishConfirm'), t('designer.publish')))) return
    publishing.value = true
    try {
      const r = await api.publish(tkey.value)
      notifySuccess(t('designer.published', { version: r.version }))
      template.value = await api.template(tkey.value)
      versions.value = versionNumbers(template.value)
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) {
        const errs = errorsFromDetails(e.details)
        if (errs.length) v.accept({ valid: false, errors: errs })
      }
      notifyError(e)
    } finally {
      publishing.value = false
    }
  }

  const draftPath = () => `/admin/templates/${encodeURIComponent(tkey.value)}/designer`
  function openVersion(n: number | string) {
    router.push(`/admin/templates/${encodeURIComponent(tkey.value)}/versions/${n}`)
  }
  function backToDraft() {
    router.push(draftPath())
  }

  /** restoreAsDraft makes the version shown the draft (after a confirmation) and opens it. */
  async function restoreAsDraft() {
    if (!(await confirm(t('designer.restoreConfirm', { version: version.value ?? '' })))) return
    try {
      await api.saveDraft(tkey.value, cleanDefinition(c.definition.value, { withLayout: true }))
      notifySuccess(t('designer.restored'))
      router.push(draftPath())
    } catch (e) {
      notifyError(e)
    }
  }

  /** importFile reads a definition file chosen in an <input type=file> onto the canvas. */
  async function importFile(ev: Event) {
    const input = ev.target as HTMLInputElement
    const file = input.files?.[0]
    input.value = ''
    if (!file) return
    try {
      const def = parseDefinition(await file.text())
      if (c.nodes.value.length > 2 && !(await confirm(t('designer.importConfirm', { n: def.nodes.length, file: file.name })))) return
      editing.clearSelection()
      await open(def)
      notifySuccess(t('designer.imported', { nodes: def.nodes.length, edges: def.edges.length }))
    } catch (e) {
      notifyError(e)
    }
  }

  /** exportFile downloads the definition as it is on the canvas. */
  function exportFile() {
    const text = JSON.stringify(cleanDefinition(c.definition.value, { withLayout: true }), null, 2)
    const a = document.createElement('a')
    a.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }))
    a.download = readonly.value ? `${tkey.value}-v${version.value}.json` : `${tkey.value}-draft.json`
    a.click()
    URL.revokeObjectURL(a.href)
  }

  return {
    readonly,
    template,
    versions,
    versionInfo,
    plugins,
    loading,
    loadError,
    saving,
    publishing,
    dirty,
    load,
    saveDraft,
    publish,
    openVersion,
    backToDraft,
    restoreAsDraft,
    importFile,
    exportFile,
  }
}

export type DesignerDocument = ReturnType<typeof useDesignerDocument>
