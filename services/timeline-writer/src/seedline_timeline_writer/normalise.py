"""Kept for callers not yet moved: normalising ingest lives in seedline_contracts.normalise."""

from seedline_contracts.normalise import Accepted, Refusal, normalise, rejected_record

__all__ = ["Accepted", "Refusal", "normalise", "rejected_record"]
