"""Small helpers every layer may use: atomic publication, the folder guard, file facts, size
parsing, and a DataLoader worker's process tuning (malloc, orphan watch). Not all pure: some
touch files or start a thread; none imports another layer of `streaming` but `errors`."""
