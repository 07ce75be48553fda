// What a failed step lacks, in the words of the person reading it: for `no_approver`, who was to approve (the
// initiator's manager, their department's leader, holders of a role, named people, people from a form field), so
// an applicant reads "您没有直属上级" / "You have no manager" instead of "approver missing or disabled".
import { t } from '@/i18n'
import type { DefNode } from './definition'

type ApproverSpec = { relation?: string; roles?: string[]; users?: string[]; context?: string; departments?: string[] }

/** missingApproverText says what is missing for node's approvers; you: the reader is the initiator. '' when the
 * node's approvers are of a kind it cannot tell. */
export function missingApproverText(node: Pick<DefNode, 'approvers'> | undefined, you: boolean): string {
  const a = node?.approvers as ApproverSpec | undefined
  if (!a) return ''
  const who = you ? 'you' : 'them'
  switch (a.relation) {
    case 'initiator.manager':
    case 'initiator.managers':
      return t(`nodeError.missing.manager.${who}`)
    case 'initiator.department.leader':
      return t(`nodeError.missing.leader.${who}`)
  }
  if (a.roles?.length) return t('nodeError.missing.roles', { roles: a.roles.join(', ') })
  if (a.departments?.length) return t('nodeError.missing.departments', { departments: a.departments.join(', ') })
  if (a.users?.length) return t('nodeError.missing.users', { users: a.users.join(', ') })
  if (a.context) return t('nodeError.missing.context', { field: a.context })
  return ''
}
