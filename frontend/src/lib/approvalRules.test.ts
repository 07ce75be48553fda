import { afterEach, describe, expect, it } from 'vitest'
import { i18n } from '@/i18n'
import { describeRuleApprovers } from './approvalRules'

afterEach(() => {
  i18n.global.locale.value = 'en'
})

describe('describeRuleApprovers', () => {
  it('says a chain of managers in words, one level or several, in both languages', () => {
    i18n.global.locale.value = 'en'
    expect(describeRuleApprovers({ relation: 'initiator.managers', levels: 1 })).toEqual(['the direct manager'])
    expect(describeRuleApprovers({ relation: 'initiator.managers', levels: 3 })).toEqual(['3 levels of managers'])
    i18n.global.locale.value = 'zh-CN'
    expect(describeRuleApprovers({ relation: 'initiator.managers', levels: 1 })).toEqual(['1 级主管'])
    expect(describeRuleApprovers({ relation: 'initiator.managers', levels: 3 })).toEqual(['3 级主管'])
  })
})
