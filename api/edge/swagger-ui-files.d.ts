// Swagger UI's files as the edge builds import them: text for the stylesheet and the script, bytes for
// the icon (Deno's raw imports; wrangler's Text and Data module rules in wrangler.jsonc).
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/favicon-32x32.png" {
  const bytes: ArrayBuffer | Uint8Array<ArrayBuffer>;
  export default bytes;
}
