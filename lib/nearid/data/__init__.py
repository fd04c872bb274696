"""Data sources. Everything is provisioned from installed packages or generated: nothing is
downloaded at run time."""
