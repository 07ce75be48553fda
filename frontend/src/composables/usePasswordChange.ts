// Changing one's own password (POST /me/password), for every page that offers it: the profile on the desktop and
// on a phone, and the page a user must pass while their password was set by someone else. The rules are checked
// before sending (lib/password.ts) and the server's refusals said as the same messages.
import { computed, reactive, ref, shallowRef } from 'vue'
import { errorMessage } from '@/api/client'
import { t } from '@/i18n'
import { checkNewPassword, passwordProblem, type Problem } from '@/lib/password'
import { session } from '@/stores/session'

/** change sends the change (default: the session's, which signs the tab in again with the new password). */
export function usePasswordChange(change: (current: string, next: string) => Promise<void> = session.changePassword) {
  const pw = reactive({ current: '', next: '', repeat: '' })
  const busy = ref(false)
  // What went wrong, kept as it came so that a language switch says it again in the new language.
  const failure = shallowRef<{ problem: Problem } | { err: unknown } | null>(null)
  const error = computed(() => {
    const f = failure.value
    if (!f) return ''
    return 'problem' in f ? t(f.problem.key, f.problem.params ?? {}) : errorMessage(f.err)
  })

  /** submit checks and sends the change; true when it went through (the fields are emptied then). */
  async function submit(): Promise<boolean> {
    failure.value = null
    const p = checkNewPassword(pw.current, pw.next, pw.repeat)
    if (p) {
      failure.value = { problem: p }
      return false
    }
    busy.value = true
    try {
      await change(pw.current, pw.next)
      Object.assign(pw, { current: '', next: '', repeat: '' })
      return true
    } catch (e) {
      const problem = passwordProblem(e)
      failure.value = problem ? { problem } : { err: e }
      return false
    } finally {
      busy.value = false
    }
  }

  return { pw, busy, error, submit }
}
