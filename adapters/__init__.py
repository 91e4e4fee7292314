"""Adapters that take rechunk into other systems (LangChain, LlamaIndex, Qdrant, Chroma).

Each lives in a leaf module imported on first use; importing this package loads no framework.
"""
