import { describe, expect, it } from 'vitest'
import {
  FIELD_TYPES,
  checkSchema,
  displayRows,
  displayValue,
  edited,
  formOf,
  htmlSrcdoc,
  initialValues,
  keepEdits,
  newField,
  sampleContext,
  shownErrors,
  validateValues,
  valuesToContext,
  type FormSchema,
} from './form'

const leave: FormSchema = {
  kind: 'components',
  fields: [
    { id: 'f1', type: 'description', label: 'Note', text: 'Fill in' },
    { id: 'f2', type: 'number', label: 'Days', field: 'days', required: true, min: 1, max: 30 },
    { id: 'f3', type: 'select', label: 'Kind', field: 'leave.kind', options: [{ label: 'Annual', value: 'annual' }, { label: 'Sick', value: 'sick' }], default: 'annual' },
    { id: 'f4', type: 'input', label: 'Reason', field: 'reason' },
    { id: 'f5', type: 'switch', label: 'Urgent', field: 'urgent', readonly: true },
    { id: 'f6', type: 'multi-select', label: 'Tags', field: 'tags', options: [{ label: 'A', value: 'a' }] },
  ],
}

describe('the catalogue', () => {
  it('has the 16 components the issue lists, and the file and image fields of uploaded attachments', () => {
    expect(FIELD_TYPES).toHaveLength(18)
    expect(FIELD_TYPES).toEqual(
      expect.arrayContaining(['input', 'textarea', 'number', 'money', 'select', 'multi-select', 'radio', 'checkbox', 'date', 'date-range', 'time', 'switch', 'user', 'department', 'attachment', 'file', 'image', 'description']),
    )
  })
  it('newField binds each new field to an unused context path and id', () => {
    const a = newField('input', [])
    const b = newField('select', [a])
    expect(a.field).not.toBe(b.field)
    expect(a.id).not.toBe(b.id)
    expect(b.options?.length).toBeGreaterThan(0)
    expect(newField('description', []).field).toBeUndefined()
  })
})

describe('initialValues / valuesToContext', () => {
  it('reads values from the context by path, then defaults, then empty values', () => {
    const v = initialValues(leave, { days: 3, leave: { kind: 'sick' } })
    expect(v).toEqual({ f2: 3, f3: 'sick', f4: '', f5: false, f6: [] })
    expect(initialValues(leave, {}).f3).toBe('annual')
  })
  it('writes values back at their dotted paths, leaving blanks out', () => {
    const ctx = valuesToContext(leave, { f2: 5, f3: 'annual', f4: '', f5: true, f6: ['a'] })
    expect(ctx).toEqual({ days: 5, leave: { kind: 'annual' }, urgent: true, tags: ['a'] })
  })
  it('can keep only fields the approver may edit', () => {
    const ctx = valuesToContext(leave, { f2: 5, f5: true }, true)
    expect(ctx).toEqual({ days: 5 })
  })
  it('does not alias the context it read from', () => {
    const context = { tags: ['a'] }
    const v = initialValues(leave, context)
    ;(v.f6 as string[]).push('b')
    expect(context.tags).toEqual(['a'])
  })
})

describe('validateValues', () => {
  it('reports required, bounds and unknown options by field id', () => {
    expect(validateValues(leave, { f2: undefined })).toEqual({ f2: 'Days is required' })
    expect(validateValues(leave, { f2: 0 })).toEqual({ f2: 'Days must be at least 1' })
    expect(validateValues(leave, { f2: 31 })).toEqual({ f2: 'Days must be at most 30' })
    expect(validateValues(leave, { f2: 2, f3: 'other' })).toEqual({ f3: 'Kind: choose one of the options' })
    expect(validateValues(leave, { f2: 2, f3: 'sick' })).toEqual({})
  })
})

describe('display', () => {
  it('shows option labels, booleans and money', () => {
    expect(displayValue(leave.fields![2], 'sick')).toBe('Sick')
    expect(displayValue(leave.fields![5], ['a'])).toBe('A')
    expect(displayValue(leave.fields![4], false)).toBe('No')
    expect(displayValue({ id: 'm', type: 'money', label: 'M', precision: 2, currency: 'CNY' }, 12.5)).toBe('12.50 CNY')
    expect(displayValue(undefined, null)).toBe('—')
  })
  it('lists a context through the form, in its order, with its labels', () => {
    const rows = displayRows(leave, { days: 2, leave: { kind: 'annual' }, other: 'x' })
    expect(rows.map((r) => [r.label, r.value])).toEqual([
      ['Days', '2'],
      ['Kind', 'Annual'],
      ['Reason', '—'],
      ['Urgent', '—'],
      ['Tags', '—'],
    ])
  })
  it('lists every leaf of the context when there is no form', () => {
    expect(displayRows(undefined, { a: 1, b: { c: 'x' }, d: [1, 2] }).map((r) => [r.label, r.value])).toEqual([
      ['a', '1'],
      ['b.c', 'x'],
      ['d', '1, 2'],
    ])
  })
})

describe('checkSchema', () => {
  it('finds unbound fields, duplicate paths and empty option lists', () => {
    const bad: FormSchema = {
      kind: 'components',
      fields: [
        { id: 'a', type: 'input', label: 'A', field: 'x' },
        { id: 'b', type: 'input', label: 'B', field: 'x' },
        { id: 'c', type: 'number', label: 'C', field: 'bad path' },
        { id: 'd', type: 'select', label: 'D', field: 'd', options: [] },
      ],
    }
    const p = checkSchema(bad)
    expect(p).toHaveLength(3)
    expect(p.join('\n')).toMatch(/both bound to "x"/)
    expect(p.join('\n')).toMatch(/"C" needs a context field/)
    expect(p.join('\n')).toMatch(/"D" has no options/)
    expect(checkSchema(leave)).toEqual([])
    expect(checkSchema({ kind: 'html', html: ' ' })).toEqual(['The HTML template is empty.'])
  })
})

describe('htmlSrcdoc', () => {
  it('embeds the context so that no value can close the script element', () => {
    const doc = htmlSrcdoc('<p>hi</p>', { evil: '</script><script>alert(1)</script>' })
    expect(doc).not.toContain('</script><script>alert(1)')
    expect(doc).toContain('\\u003c/script>')
    expect(doc).toContain("default-src 'none'")
    expect(doc).toContain('<p>hi</p>')
  })
  it('gives the template its context as window.halley.context', () => {
    const doc = htmlSrcdoc('', { n: 1 })
    const m = doc.match(/window\.halley = Object\.freeze\(\{ context: (.*) \}\);/)
    expect(m && JSON.parse(m[1])).toEqual({ n: 1 })
  })
})

describe('formOf', () => {
  it('finds the form in GET /forms answers of several shapes', () => {
    const f: FormSchema = { kind: 'components', fields: [] }
    expect(formOf({ form: f, members: [] })).toEqual(f)
    expect(formOf({ trigger: { kind: 'form', form: f } })).toEqual(f)
    expect(formOf({ kind: 'form', form: f })).toEqual(f)
    expect(formOf({ fields: [] })).toEqual({ kind: 'components', fields: [] })
    expect(formOf({ kind: 'manual' })).toBeUndefined()
    expect(formOf(null)).toBeUndefined()
  })
})

describe('sampleContext', () => {
  it('gives each bound field a plausible value at its path', () => {
    expect(sampleContext(leave)).toEqual({ days: 3, leave: { kind: 'annual' }, reason: 'text', urgent: true, tags: ['a'] })
    expect(sampleContext(undefined)).toEqual({})
  })
})

describe('shownErrors and keepEdits', () => {
  const initial = { deputy: '', escalate: false, note: 'x' }
  const errors = { deputy: 'Who covers is required', note: 'Note is too long' }
  it('shows nothing on an untouched form, a field’s error once it is changed, everything after a try', () => {
    expect(shownErrors(errors, { ...initial }, initial, false)).toEqual({})
    expect(shownErrors(errors, { ...initial, note: 'xy' }, initial, false)).toEqual({ note: 'Note is too long' })
    // typed and cleared again: back to the loaded value, so still untouched
    expect(shownErrors(errors, { ...initial, deputy: '' }, initial, false)).toEqual({})
    expect(shownErrors(errors, { ...initial }, initial, true)).toEqual(errors)
  })
  it('lists edited fields by value, not by identity', () => {
    expect([...edited({ a: [1, 2], b: { c: 1 } }, { a: [1, 2], b: { c: 1 } })]).toEqual([])
    expect([...edited({ a: [1, 3] }, { a: [1, 2], b: 1 })].sort()).toEqual(['a', 'b'])
  })
  it('keeps what the person changed when the page reloads under them, and takes the rest fresh', () => {
    const fresh = { deputy: '', escalate: true, note: 'y' }
    expect(keepEdits({ ...initial, deputy: 'bob' }, initial, fresh)).toEqual({ deputy: 'bob', escalate: true, note: 'y' })
    expect(keepEdits({ ...initial }, initial, fresh)).toEqual(fresh)
  })
})
