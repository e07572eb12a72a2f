"""DELIVER domain: the evidence layer, reconciling documents against it, rendering from it."""
