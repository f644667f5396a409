"""coord"""
