// The approval rules of API.md ("Additions of 2026-11-25", "Approval rules"): the approver kinds beyond users,
// roles, context and the two relations — departments, roles with a scope, the manager chain by levels or up to a
// role — and the rules of a node (on_no_approver, exclude_initiator) and of the whole process (options.self_approval,
// options.dedupe). Written against the contract: until the definition schema has them, the types are extended here.
import type { Approvers } from '@/generated/definition'
import { t } from '@/i18n'

/** Approvers with the approval rules' members. */
export type RuleApprovers = Omit<Approvers, 'relation'> & {
  relation?: Relation
  departments?: string[]
  scope?: RoleScope
  levels?: number
  until_role?: string
}

export const ROLE_SCOPES = ['tenant', 'initiator.department', 'initiator.department_tree'] as const
export type RoleScope = (typeof ROLE_SCOPES)[number]

/** The relations to the initiator: the two single ones and the manager chain. */
export const ALL_RELATIONS = ['initiator.manager', 'initiator.department.leader', 'initiator.managers'] as const
export type Relation = (typeof ALL_RELATIONS)[number]

/** scopeLabel names a role scope in the user's language. */
export function scopeLabel(s: RoleScope): string {
  return t(s === 'initiator.department' ? 'rules.scope.department' : s === 'initiator.department_tree' ? 'rules.scope.departmentTree' : 'rules.scope.tenant')
}

export const ON_NO_APPROVER = ['error', 'pass', 'reject', 'admins'] as const
export const SELF_APPROVAL = ['allow', 'pass', 'manager'] as const
export const DEDUPE = ['none', 'consecutive', 'any'] as const

/** The approval node's rule fields, kept by cleanNode beside the schema's. */
export const APPROVAL_RULE_FIELDS = ['on_no_approver', 'exclude_initiator'] as const

/** cleanRuleApprovers keeps the rules' members that are set: departments, a role scope beside roles (not the
 * default), a manager chain's levels or until_role (only with relation initiator.managers). */
export function cleanRuleApprovers(a: RuleApprovers, out: RuleApprovers): void {
  const deps = (a.departments ?? []).map((d) => d.trim()).filter(Boolean)
  if (deps.length) out.departments = deps
  if (out.roles?.length && a.scope && a.scope !== 'tenant') out.scope = a.scope
  if (a.relation === 'initiator.managers') {
    if (a.until_role?.trim()) out.until_role = a.until_role.trim()
    else if (Number.isInteger(a.levels) && (a.levels ?? 0) > 0) out.levels = a.levels
  }
}

/** describeRules says the extra approvers in words, for a node's summary. */
export function describeRuleApprovers(a: RuleApprovers): string[] {
  const parts: string[] = []
  if (a.departments?.length) parts.push(t('rules.summary.departments', { list: a.departments.join(', ') }))
  if (a.relation === 'initiator.managers') {
    parts.push(a.until_role ? t('rules.summary.chainUntil', { role: a.until_role }) : t('rules.summary.chainLevels', { n: a.levels ?? 1 }, a.levels ?? 1))
  }
  return parts
}
