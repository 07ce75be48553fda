// Helpers for unit tests (never imported by the app): the message files as lists of keys.

/** messageKeys lists the dotted keys of a message file's leaves ("task.history"). */
export function messageKeys(o: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(o).flatMap(([k, v]) => (v && typeof v === 'object' ? messageKeys(v as Record<string, unknown>, `${prefix}${k}.`) : [`${prefix}${k}`]))
}
