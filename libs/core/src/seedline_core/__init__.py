"""Seedline's pure core: the continuity decision, the brief, outcomes and notices.

Nothing here does I/O or reads the clock; callers pass time in.
"""
