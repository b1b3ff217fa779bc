"""Transports: thin drivers that move bytes between a client and the kernel."""
