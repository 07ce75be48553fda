// Node positions kept in this browser as well, per template: a fallback for when the server does not keep the
// definition's `layout` key, so a reopened draft still looks the way the admin left it.
import type { Point } from '@/lib/definition'

const key = (tkey: string) => `halley.layout.${tkey}`

export function loadLayout(tkey: string): Record<string, Point> | null {
  try {
    const v = localStorage.getItem(key(tkey))
    return v ? (JSON.parse(v) as Record<string, Point>) : null
  } catch {
    return null
  }
}

export function saveLayout(tkey: string, layout: Record<string, Point>): void {
  try {
    localStorage.setItem(key(tkey), JSON.stringify(layout))
  } catch {
    /* storage full or disabled: positions are only lost on reload */
  }
}
