// swagger-ui-dist ships no types; the page uses only its constructor.
declare module 'swagger-ui-dist/swagger-ui-es-bundle.js' {
  const SwaggerUIBundle: (options: Record<string, unknown>) => unknown
  export default SwaggerUIBundle
}
