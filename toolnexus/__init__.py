"""toolnexus: a YAML manifest in, a ready set of tools for an LLM agent out."""
