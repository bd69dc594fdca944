"""Seedline wire contract: message types, subjects, token escaping, stream configs."""
