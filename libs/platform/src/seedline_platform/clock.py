"""Kept for callers not yet moved: the times of the contract live in seedline_contracts.times."""

from seedline_contracts.times import format_utc, now_text, parse_rfc3339, utc_now

__all__ = ["format_utc", "now_text", "parse_rfc3339", "utc_now"]
