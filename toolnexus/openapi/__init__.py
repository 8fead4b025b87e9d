"""Reading OpenAPI descriptions: the fast, guarded reader (`text`), `$ref`s across files
(`refs`) and the manifest's operation filters (`select`). Turning operations into tools is the
OpenAPI source's job (`toolnexus.sources.openapi`)."""
