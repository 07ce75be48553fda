import { createApp } from 'vue'
import App from './App.vue'
import { router } from './router'
import { i18n } from './i18n'
import { setUnauthorizedHandler } from './api/client'
import { session } from './stores/session'
import './styles.css'

// An expired or revoked token (or a disabled account) ends the session; the user signs in again and comes back to
// the same page.
setUnauthorizedHandler(() => {
  session.logout()
  const current = router.currentRoute.value
  if (current.name !== 'login') router.replace({ name: 'login', query: { redirect: current.fullPath } })
})

createApp(App).use(i18n).use(router).mount('#app')
