"""Agent framework integrations: optional extras, each a thin module over `Toolkit`."""
