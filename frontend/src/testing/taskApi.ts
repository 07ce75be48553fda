// Helpers for unit tests (never imported by the app): the task endpoints, recorded instead of sent.
import type { TaskActionApi } from '@/lib/taskActions'

/** recordingTaskApi records each call as [endpoint, ...arguments]; every call fails with fail when one is given. */
export function recordingTaskApi(fail?: unknown): { api: TaskActionApi; calls: unknown[][] } {
  const calls: unknown[][] = []
  const rec =
    (name: string) =>
    async (...args: unknown[]) => {
      calls.push([name, ...args])
      if (fail) throw fail
    }
  const api: TaskActionApi = { approve: rec('approve'), reject: rec('reject'), transfer: rec('transfer'), addSign: rec('addSign'), returnTo: rec('returnTo'), reclaim: rec('reclaim') }
  return { api, calls }
}
