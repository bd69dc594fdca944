"""Byte sizes a person can read, with the exact number beside them."""

from __future__ import annotations


def size_text(size: int) -> str:
    """1,048,576 -> '1.0 MiB (1,048,576 bytes)'; small sizes in bytes alone."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"
