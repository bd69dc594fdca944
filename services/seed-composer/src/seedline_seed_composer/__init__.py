"""seedline_seed_composer."""
