"""The names of the files this library keeps in a cache folder beside the shards (each one is
explained where it is used: `marker`, `origin`, `node_claim`)."""

from __future__ import annotations

CACHE_MARKER = ".streaming-cache"  # the folder is a cache this library filled from a remote
ORIGIN_FILE = ".streaming-origin.json"  # the remote the folder caches
ORIGIN_LOCK = ".streaming-origin.lock"  # held while the folder's index.json is fetched
NODE_FILE = ".streaming-node.json"  # the node that took the folder
NODE_LOCK = ".streaming-node.lock"  # held by every process that uses the folder

BOOKKEEPING_FILES = frozenset({CACHE_MARKER, ORIGIN_FILE, ORIGIN_LOCK, NODE_FILE, NODE_LOCK})
# About what the marker, origin and node files of one folder hold together (the origin file
# names the remote, so it varies a little).
BOOKKEEPING_BYTES = 256
