"""The operator (`taskqueue-operator`): kopf handlers, the poll of each TaskQueue, the
Kubernetes client, the Redis connections, leader election, admission rules.
"""
