"""plan/batching"""
