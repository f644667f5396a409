"""Small pure helpers shared across layers."""
