"""Seedline developer tooling: embedded servers, pytest fixtures, load helpers, role and NATS user tooling.

Used by `seedline up`, the tests and the benchmarks; service images do not ship it."""
