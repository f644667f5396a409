"""plan/partition"""
