"""plan/shuffle"""
