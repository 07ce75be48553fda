// Users, roles and departments for the pickers, fetched once and shared by every picker on the page.
import { ref } from 'vue'
import { api, type Department, type User } from '@/api'

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
