// Readable summaries of approver specifications (API.md "Approvers").
import { t } from '@/i18n'
import type { Approvers, SignMode } from './definition'
import { describeRuleApprovers, scopeLabel, type RuleApprovers } from './approvalRules'

export function describeApprovers(a: Approvers | undefined): string {
  if (!a) return t('approvers.nobody')
  const parts: string[] = []
  if (a.users?.length) parts.push(t('approvers.users', { list: a.users.join(', ') }))
  if (a.roles?.length) parts.push(t('approvers.roles', { list: a.roles.join(', ') }))
  if (a.context) parts.push(t('approvers.context', { path: a.context }))
  const r = a as RuleApprovers
  if (r.roles?.length && r.scope && r.scope !== 'tenant') parts[parts.length - 1] += ` (${scopeLabel(r.scope)})`
  if (a.relation === 'initiator.manager') parts.push(t('approvers.manager'))
  else if (a.relation === 'initiator.department.leader') parts.push(t('approvers.leader'))
  parts.push(...describeRuleApprovers(r))
  if (a.groups?.length) parts.push(t('approvers.groups', { n: a.groups.length, list: a.groups.map((g) => `[${g.join(', ')}]`).join(' ') }))
  if (a.groups_context) parts.push(t('approvers.groupsContext', { path: a.groups_context }))
  return parts.length ? parts.join(t('approvers.separator')) : t('approvers.nobody')
}

// Keyed by the schema's sign modes: a mode added to the Go types fails the build until it has a label here.
// Messages (sign.<mode>), read when shown: they follow the language.
export const SIGN_LABELS: Record<SignMode, string> = {
  get or() {
    return t('sign.or')
  },
  get all() {
    return t('sign.all')
  },
  get sequential() {
    return t('sign.sequential')
  },
  get vote() {
    return t('sign.vote')
  },
}
