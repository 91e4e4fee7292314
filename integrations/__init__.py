"""Integrations that bring outside capabilities into rechunk (embedders, tokenizers).

Each lives in a leaf module imported on first use; importing this package loads no framework.
"""
