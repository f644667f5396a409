"""Shard preparation: a shard's file made ready to read on this node (fetched from the stream's
remote, decompressed, verified), text-format meta files, and Parquet row groups fetched by their
column chunks with the index built from the files' footers."""
