import { describe, expect, it } from 'vitest'
import { conditionText } from './conditionText'

// The cases of the server's formatter (service/condition/condition_test.go, TestString): both must say the same.
describe('conditionText', () => {
  const cases: [string, string][] = [
    ['{}', ''],
    ['null', ''],
    ['{"level":{"$gte":3},"dept":{"$in":["a","b"]}}', 'level >= 3 and dept in [a,b]'],
    ['{"days":{"$gt":5}}', 'days > 5'],
    ['{"a":1,"b":"x","c":true,"d":null}', 'a = 1 and b = x and c = true and d = null'],
    ['{"a":""}', 'a = ""'],
    ['{"a":{"$ne":1,"$lt":2,"$lte":3}}', 'a != 1 and a < 2 and a <= 3'],
    ['{"a":{"$nin":[1,2]}}', 'a not in [1,2]'],
    ['{"a":{"$exists":true},"b":{"$exists":false}}', 'a exists and b not exists'],
    ['{"a":{"$type":"string"},"b":{"$type":[2,"null"]}}', 'a is string and b is [string,null]'],
    ['{"name":{"$regex":"^a.*","$options":"i"}}', 'name ~ /^a.*/i'],
    ['{"tags":{"$size":2}}', 'size(tags) = 2'],
    ['{"tags":{"$all":["x","y"]}}', 'tags all [x,y]'],
    ['{"results":{"$elemMatch":{"$gte":80,"$lt":85}}}', 'results any (>= 80 and < 85)'],
    ['{"items":{"$elemMatch":{"sku":"x","qty":{"$gt":1}}}}', 'items any (sku = x and qty > 1)'],
    ['{"a":{"$not":{"$gt":5}}}', 'not (a > 5)'],
    ['{"$or":[{"a":1},{"b":2}],"c":3}', '(a = 1 or b = 2) and c = 3'],
    ['{"$or":[{"a":1,"b":2},{"c":3}]}', '(a = 1 and b = 2) or c = 3'],
    ['{"$nor":[{"a":1},{"b":2}]}', 'not (a = 1 or b = 2)'],
    ['{"$and":[{"a":1}]}', 'a = 1'],
    ['{"a":{"b":[1,{"c":"d"}]}}', 'a = {b:[1,{c:d}]}'],
    ['{"a":{"$in":[1,2,3,4,5,6,7,8]}}', 'a in [1,2,3,4,5,…]'],
    [`{"a":"${'x'.repeat(40)}"}`, `a = ${'x'.repeat(31)}…`],
    // the ready-made leave template's escalation edge
    ['{"$or":[{"days":{"$gt":3}},{"lead_review.escalate":true}]}', 'days > 3 or lead_review.escalate = true'],
  ]
  for (const [cond, want] of cases) {
    it(cond, () => expect(conditionText(JSON.parse(cond))).toBe(want))
  }
  it('shows an operator it does not know as JSON', () => {
    expect(conditionText({ a: { $near: [1, 2] } })).toBe('a $near [1,2]')
  })
})
