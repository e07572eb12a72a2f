"""The on-box patrol and its notifications: the box reports on itself while nobody is watching."""
