"""Public testing helpers: hypothesis strategies for valid session event sequences and the
invariants every projection must keep."""
