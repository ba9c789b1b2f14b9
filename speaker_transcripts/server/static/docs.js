// GET /docs: Swagger UI over this server's OpenAPI schema. A file of its own, not an inline script,
// so the docs page runs under a policy that allows this server's scripts and nothing else.
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    layout: "BaseLayout",
  });
});
