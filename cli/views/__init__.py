"""Rich renderers, one module per command (or object) they render, so that command modules stay thin."""
