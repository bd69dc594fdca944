"""A conversation moves whole (CONTRACT.md 6): its checkout's uncommitted work and its
engine's own record, saved when it stops and applied on the machine it moves to."""
