"""The bundled price tables (data files)."""
