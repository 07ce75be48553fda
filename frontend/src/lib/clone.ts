/**
 * clone deep-copies JSON data. Not structuredClone: that throws on Vue's reactive proxies, and everything the
 * designer edits is reactive JSON anyway.
 */
export function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T)
}
