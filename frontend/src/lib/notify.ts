// Desktop notifications and confirmations (Element Plus), with their styles, since they are called from code and
// not resolved as components.
import { ElMessage, ElMessageBox } from 'element-plus'
import 'element-plus/es/components/message/style/css'
import 'element-plus/es/components/message-box/style/css'
import { errorMessage } from '@/api/client'
import { t } from '@/i18n'

export function notifyError(err: unknown): void {
  ElMessage({ type: 'error', message: errorMessage(err), showClose: true, duration: 6000, customClass: 'halley-pre' })
}

export function notifySuccess(message: string): void {
  ElMessage({ type: 'success', message })
}

export async function confirm(message: string, title = t('common.confirm')): Promise<boolean> {
  try {
    await ElMessageBox.confirm(message, title, { type: 'warning', confirmButtonText: t('common.yes'), cancelButtonText: t('common.cancel') })
    return true
  } catch {
    return false
  }
}
