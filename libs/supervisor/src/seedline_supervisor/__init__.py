"""The supervisor of `seedline up` (see supervisor.py): what it starts, how it sees each
process end, and how it starts it again."""
