"""`taskqueue`: the on-call engineer's tool for one TaskQueue's Redis keys.

One module per command group (`enqueue`, `stats`, `inflight`, `dlq`, `drain`); `target` resolves
which TaskQueue and Redis a command works on (manifest file, cluster object or plain flags), `ui`
holds the terminal helpers (tables, durations, progress bar, confirmation), `main` the parser and
the mapping of errors to exit codes.
"""
