"""Data onto the box: downloads run on the box itself (fetch_data), never through this machine."""
