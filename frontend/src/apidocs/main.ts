// The /api/docs page: Swagger UI, bundled by Vite (no CDN), rendering GET /api/v1/openapi.json. Requests made with
// "Try it out" go to this Halley; "Authorize" takes a token from POST /api/v1/auth/login or an API token.
import SwaggerUIBundle from 'swagger-ui-dist/swagger-ui-es-bundle.js'
import 'swagger-ui-dist/swagger-ui.css'

export const openapiURL = '/api/v1/openapi.json'

SwaggerUIBundle({
  url: openapiURL,
  dom_id: '#api-docs',
  deepLinking: true,
  tryItOutEnabled: false,
  // No remote validator badge: the page calls nothing but this Halley.
  validatorUrl: null,
})
