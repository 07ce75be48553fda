// Users, roles and departments for the pickers, fetched once and shared by every picker on the page.
import { computed, ref } from 'vue'
import { api, type Department, type User } from '@/api'
import { getToken } from '@/api/client'

const users = ref<User[]>([])
const departments = ref<Department[]>([])
let usersPromise: Promise<User[]> | null = null
let deptPromise: Promise<Department[]> | null = null

export function useDirectory() {
  function loadUsers(force = false): Promise<User[]> {
    if (!usersPromise || force) {
      usersPromise = api.users().then(
        (u) => (users.value = u),
        (e) => {
          usersPromise = null
          throw e
        },
      )
    }
    return usersPromise
  }
  function loadDepartments(force = false): Promise<Department[]> {
    if (!deptPromise || force) {
      deptPromise = api.departments().then(
        (d) => (departments.value = d),
        (e) => {
          deptPromise = null
          throw e
        },
      )
    }
    return deptPromise
  }
  /** roles are not listed by the API: they are the union of the roles users hold. */
  function roles(): string[] {
    return [...new Set(users.value.flatMap((u) => u.roles ?? []))].sort()
  }
  return { users, departments, loadUsers, loadDepartments, roles }
}

const displayNames = computed(() => new Map(users.value.filter((u) => u.display_name).map((u) => [u.username, u.display_name as string])))
let namesAsked = false

/** personName is how a person is shown where the server names them by username (initiators, assignees, the
 * history): their display name once the directory has loaded — the first call of a signed-in page loads it, and
 * the pages re-render when it arrives — else the username. */
export function personName(username: string): string {
  if (!namesAsked && users.value.length === 0 && getToken()) {
    namesAsked = true
    useDirectory()
      .loadUsers()
      .catch(() => {}) // a page without the directory still names people, by username
  }
  return displayNames.value.get(username) ?? username
}
