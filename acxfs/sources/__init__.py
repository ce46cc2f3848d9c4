"""Containers behind one seam: each source turns a file into a verified Tree and serves content."""
