"""Redis access: DSN parsing, the one redis-py client factory, the queue operations the
operator and the CLI share, and the ACL rules the scripts need.
"""
