"""Tracker runs as sources (W&B run folders, MLflow stores, TensorBoard event files), tied to this
server's runs, and the forensics over them."""
