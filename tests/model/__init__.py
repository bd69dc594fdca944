"""The platform run as separate processes, and a reference model of its conversation state."""
