"""The scaling maths, pure (no I/O): what a poll observed, the measured rates, the wait
model, the replica decision and the scale-in plan.
"""
