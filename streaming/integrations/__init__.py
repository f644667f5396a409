"""Glue between streaming datasets and training frameworks, one module per framework.

Each module imports its framework when it is imported itself (never from `import streaming`),
and raises MissingExtraError naming the extra to install when the framework is absent.
"""
