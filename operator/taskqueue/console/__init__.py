"""The web console (`taskqueue console`): server-rendered pages of TaskQueues, their queues, dead
letters and history, read-only unless actions are enabled (docs/console.md)."""
