import { createRouter, createWebHistory } from 'vue-router'
import { guard, routes } from './routes'
import { t } from './i18n'

export const router = createRouter({ history: createWebHistory(), routes })

router.beforeEach(guard)

router.afterEach((to) => {
  document.title = to.meta.title ? `${t(to.meta.title)} · Halley` : 'Halley'
})
