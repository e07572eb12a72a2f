"""The path policy: what a tool may read, write, delete or send on a box, and the server's own
control trees it never touches."""
