import { describe, expect, it } from 'vitest'
import { i18n } from '@/i18n'
import { missingApproverText } from './failure'

describe('missingApproverText', () => {
  it('says what is missing, to the applicant and to others, in both languages', () => {
    i18n.global.locale.value = 'zh-CN'
    expect(missingApproverText({ approvers: { relation: 'initiator.manager' } }, true)).toBe('您没有直属上级。')
    expect(missingApproverText({ approvers: { relation: 'initiator.department.leader' } }, true)).toContain('部门')
    i18n.global.locale.value = 'en'
    expect(missingApproverText({ approvers: { relation: 'initiator.manager' } }, true)).toBe('You have no manager.')
    expect(missingApproverText({ approvers: { relation: 'initiator.manager' } }, false)).toBe('The applicant has no manager.')
    expect(missingApproverText({ approvers: { roles: ['finance'] } }, true)).toContain('finance')
    expect(missingApproverText({ approvers: { users: ['ghost'] } }, true)).toContain('ghost')
    expect(missingApproverText({ approvers: { context: 'reviewer' } }, true)).toContain('reviewer')
    expect(missingApproverText({}, true)).toBe('')
  })
})
