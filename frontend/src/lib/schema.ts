// What the designer knows about a definition's fields, read from its JSON Schema (src/generated/definition.ts,
// generated from model/definition.schema.json, itself generated from the Go types): the node types and the other
// enumerations, which fields belong to which node type or trigger kind, the id rule, and each field's description,
// shown as help text (in Chinese from i18n/field-help.zh-CN.ts). Nothing here spells a field: a field added to the
// Go types appears here by `make generate`.
import { definitionSchema as S, type Node, type Trigger } from '@/generated/definition'
import helpZhCN from '@/i18n/field-help.zh-CN'

/** PropertySchema is what this module reads from a property of the schema. */
interface PropertySchema {
  description?: string
  enum?: readonly string[]
  default?: unknown
  pattern?: string
  maxLength?: number
  examples?: readonly unknown[]
  'x-for'?: readonly string[]
  'x-required-for'?: readonly string[]
  'x-pattern-message'?: string
}

/** The object types of a definition, as the schema names them. */
export type SchemaType = keyof typeof S.$defs | 'Definition'

function properties(type: SchemaType): Record<string, PropertySchema> {
  const def = type === 'Definition' ? S : S.$defs[type]
  return def.properties as unknown as Record<string, PropertySchema>
}

export const NODE_TYPES = S.$defs.Node.properties.type.enum
export const SIGN_MODES = S.$defs.Node.properties.sign.enum
export const JOIN_MODES = S.$defs.Node.properties.join.oneOf[0].enum
export const TRIGGER_KINDS = S.$defs.Trigger.properties.kind.enum
export const LOGIN_VERIFICATIONS = S.$defs.Trigger.properties.login_verification.enum
export const ERROR_OPERATIONS = S.$defs.ErrorHandler.properties.operation.enum
export const RELATIONS = S.$defs.Approvers.properties.relation.enum
export const ON_TIMEOUT_ACTIONS = S.$defs.Node.properties.on_timeout.oneOf[0].enum

/** ownedFields maps each value of a type's discriminator (a node's type, a trigger's kind) to the fields that
 * belong to it alone (x-for); the fields without x-for belong to every value and are listed under `common`. */
function ownedFields<V extends string, F extends string>(type: SchemaType, values: readonly V[]) {
  const byValue = Object.fromEntries(values.map((v) => [v, [] as F[]])) as Record<V, F[]>
  const common: F[] = []
  for (const [field, p] of Object.entries(properties(type))) {
    const owners = p['x-for']
    if (!owners) common.push(field as F)
    else for (const v of owners) byValue[v as V]?.push(field as F)
  }
  return { common, byValue }
}

const nodeFields = ownedFields<Node['type'], keyof Node>('Node', NODE_TYPES)
const triggerFields = ownedFields<Trigger['kind'], keyof Trigger>('Trigger', TRIGGER_KINDS)

/** The fields every node type has (id, type, name, join, plugins, timeout...). */
export const COMMON_FIELDS: readonly (keyof Node)[] = nodeFields.common
/** The fields each node type owns besides the common ones. */
export const TYPE_FIELDS: Record<Node['type'], readonly (keyof Node)[]> = nodeFields.byValue
/** The fields each trigger kind owns besides kind. */
export const TRIGGER_FIELDS: Record<Trigger['kind'], readonly (keyof Trigger)[]> = triggerFields.byValue

/** describe returns the help text of a field ('' when the schema has none): the schema's description (the Go doc
 * comment), or its Chinese for lang zh-CN (the English when it has no translation yet). */
export function describe(type: SchemaType, field: string, lang = 'en'): string {
  const en = properties(type)[field]?.description ?? ''
  if (!en || lang !== 'zh-CN') return en
  return helpZhCN[`${type}.${field}`] ?? en
}

/** describedFields lists every field the schema describes, as "Type.field" (the keys of the help translations). */
export function describedFields(): string[] {
  const types: SchemaType[] = ['Definition', ...(Object.keys(S.$defs) as SchemaType[])]
  return types.flatMap((t) =>
    Object.entries(properties(t))
      .filter(([, p]) => p.description)
      .map(([f]) => `${t}.${f}`),
  )
}

/** example returns the schema's example value of a field, as text ('' when it has none). */
export function example(type: SchemaType, field: string): string {
  const ex = properties(type)[field]?.examples?.[0]
  return ex === undefined ? '' : String(ex)
}

const idSchema = properties('Node').id

/** checkNodeId returns why an id is not a valid node id, or null: the server's rule, from the schema. */
export function checkNodeId(id: string): string | null {
  if (!id) return 'The id cannot be empty.'
  if (idSchema.maxLength !== undefined && [...id].length > idSchema.maxLength) return `The id may be at most ${idSchema.maxLength} characters long.`
  if (idSchema.pattern && !new RegExp(idSchema.pattern).test(id)) return `The id ${idSchema['x-pattern-message'] ?? 'is not valid'}.`
  return null
}
