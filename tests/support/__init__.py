"""Test infrastructure: a real OpenSSH sshd on loopback, and fake GPU tools for it."""
