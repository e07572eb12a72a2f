"""Code onto the box: immutable, content-addressed snapshots of a local project (push_code)."""
