"""seedline_timeline_writer."""
